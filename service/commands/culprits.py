"""The upstream loop's write side: a breakage's regression range when it opens, its
ranked suspects when the range has been listed, and the PR report they call for.

Each step leaves an outbox message for the next one that needs GitHub (listing the
range, posting to the PR), so nothing here waits on the network; the caller commits.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.commands import bisections, outbox
from service.commands.breakages import is_muted
from service.commands.notifications import notify_culprit_confirmed
from service.domain.regression import RegressionRange
from service.domain.triage_actions import disputed_prs
from service.domain.verification import VerifyState, is_confirmed
from service.models import Breakage, OutboxKind, Run, utcnow

UPSTREAM = "upstream"


def store_range(breakage: Breakage, found: RegressionRange) -> None:
    breakage.range_base_run_id = found.base.run_id if found.base else None
    breakage.range_base_sha = found.base.git_version if found.base else None
    breakage.range_base_version = found.base.version if found.base else None
    breakage.range_head_sha = found.head.git_version or None
    breakage.range_head_version = found.head.version or None
    breakage.range_note = found.note


def on_opened(session: Session, breakage: Breakage, found: RegressionRange) -> None:
    """Fix the range of a breakage the run opened and, for an upstream one, ask for its
    suspects. Other categories keep their range (it is still evidence) but are not
    upstream's to answer for."""
    store_range(breakage, found)
    if breakage.category != UPSTREAM:
        breakage.culprits_note = f"not analysed: a {breakage.category} break, not upstream's"
        return
    if not found.complete:
        breakage.culprits_note = f"no suspect: {found.note}"
        return
    if bisections.start(session, breakage, found) is not None:
        # Several nightlies apart: the ranking waits for the narrowed range (narrowed()).
        return
    breakage.culprits_note = "waiting for the range's commits from GitHub"
    request_analysis(session, breakage)


def narrowed(session: Session, breakage: Breakage, found: RegressionRange, how: str) -> None:
    """A bisection narrowed the breakage's range to ``found``: rank that one instead."""
    store_range(breakage, found)
    if not found.complete:
        breakage.culprits_note = f"no suspect: {how}; {found.note}"
        return
    breakage.culprits_note = f"{how}; waiting for the range's commits from GitHub"
    request_analysis(session, breakage)


def became_upstream(session: Session, breakage: Breakage) -> None:
    """A breakage that opened as another category and is upstream's now (an isolating run
    settled it): its suspects are asked for over the range fixed when it opened."""
    if not (breakage.range_base_sha and breakage.range_head_sha):
        breakage.culprits_note = f"no suspect: {breakage.range_note or 'no regression range'}"
        return
    if request_analysis(session, breakage):
        breakage.culprits_note = "waiting for the range's commits from GitHub"


def request_analysis(session: Session, breakage: Breakage) -> bool:
    """One ranking per (breakage, range): asking again for the same range is a no-op."""
    key = f"culprit:{breakage.id}:{breakage.range_base_sha}..{breakage.range_head_sha}"
    return outbox.enqueue(
        session,
        kind=OutboxKind.CULPRIT,
        target=f"breakage:{breakage.id}",
        dedupe_key=_short_key(key),
        payload={"breakage_id": breakage.id},
        breakage_id=breakage.id,
    )


def store_suspects(
    session: Session,
    breakage: Breakage,
    suspects: list[dict[str, Any]],
    note: str | None,
    *,
    repo: str,
    min_score: float,
) -> None:
    """Keep the ranking (best first) and ask for the PR report it justifies."""
    breakage.culprits = suspects
    breakage.culprits_note = note
    breakage.culprits_ranked_at = utcnow()
    request_pr_report(session, breakage, repo=repo, min_score=min_score)
    # Until the culprit's verification lands (and calls it itself), a suspect confident
    # enough to be reported is what subscribers hear as confirmed.
    if reported_pr(breakage, min_score) is not None:
        notify_culprit_confirmed(session, breakage, suspects[0])


def reported_pr(breakage: Breakage, min_score: float) -> int | None:
    """The PR a breakage is reported on: its top suspect's, when confident enough or
    confirmed by undoing it (``service.domain.verification``); a suspect the experiment
    refuted, or a person disputed, is passed over. A snoozed breakage is reported on none:
    this is the one gate of its label and comment."""
    if is_muted(breakage):
        return None
    top = reported_suspect(breakage)
    if top is None or top.get("pr") is None:
        return None
    if not is_confirmed(top) and float(top.get("score", 0)) < min_score:
        return None
    return int(top["pr"])


def reported_suspect(breakage: Breakage) -> dict[str, Any] | None:
    """The suspect a report names: the first one no verification refuted and no person
    disputed ("not this PR", for this breakage only)."""
    disputed = disputed_prs(breakage.disputes)
    for suspect in breakage.culprits or []:
        if (suspect.get("verification") or {}).get("state") == VerifyState.REFUTED:
            continue
        if suspect.get("pr") is not None and int(suspect["pr"]) in disputed:
            continue
        return dict(suspect)
    return None


def breakages_on_pr(session: Session, pr: int, min_score: float) -> list[Breakage]:
    """Every breakage (open or resolved) whose report goes to ``pr``, and those on which
    a person disputed ``pr`` (the comment says so). The JSON column is filtered here, not
    in SQL: the candidates are the few breakages with suspects."""
    candidates = session.scalars(
        select(Breakage).where(Breakage.category == UPSTREAM).order_by(Breakage.id)
    )
    return [b for b in candidates
            if reported_pr(b, min_score) == pr or pr in disputed_prs(b.disputes)]


def request_pr_report(
    session: Session, breakage: Breakage, *, repo: str, min_score: float, again: bool = False,
    pr: int | None = None,
) -> bool:
    """Queue the PR's report if what it would say has changed since the last one queued
    (``again``: even if not, as when an operator asks for it after fixing the token).
    ``pr``: that PR's, not the one the breakage is reported on (a disputed one).

    The message carries no body: the drain renders the PR's current state when it sends,
    so a report delayed by an outage still says the newest thing."""
    pr = pr if pr is not None else reported_pr(breakage, min_score)
    if pr is None:
        return False
    state = [
        (b.id, b.status, b.occurrences, b.last_seen_run_id, b.backend_id, len(b.disputes or []))
        for b in breakages_on_pr(session, pr, min_score)
    ]
    nonce = utcnow().isoformat() if again else ""
    digest = hashlib.sha256(json.dumps([state, nonce]).encode()).hexdigest()[:24]
    target = f"{repo}#{pr}"
    return outbox.enqueue(
        session,
        kind=OutboxKind.PR_REPORT,
        target=target,
        dedupe_key=_short_key(f"pr-report:{target}:{digest}"),
        payload={"repo": repo, "pr": pr},
        breakage_id=breakage.id,
    )


def after_run(
    session: Session,
    run: Run,
    touched: list[Breakage],
    resolved: list[Breakage],
    *,
    found: RegressionRange,
    repo: str,
    min_score: float,
) -> None:
    """The run's part of the loop: breakages it opened get its range ``found`` (and, when
    upstream's, an analysis); those already reported get their PR's comment refreshed
    (one more occurrence, or resolved); one that turned upstream gets its analysis."""
    for breakage in touched:
        if breakage.first_seen_run_id == run.id:
            on_opened(session, breakage, found)
        elif breakage.culprits:
            request_pr_report(session, breakage, repo=repo, min_score=min_score)
        elif breakage.category == UPSTREAM and breakage.culprits_ranked_at is None:
            became_upstream(session, breakage)
    for breakage in resolved:
        if breakage.culprits:
            request_pr_report(session, breakage, repo=repo, min_score=min_score)


def _short_key(key: str) -> str:
    # dedupe_key is 128 characters; shas and repo names could exceed it.
    return key if len(key) <= 128 else key[:80] + ":" + hashlib.sha256(key.encode()).hexdigest()[:40]
