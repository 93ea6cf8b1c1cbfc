"""Drain the outbox: send what ootci owes GitHub (see ``service.models.outbox``).

One message at a time, each in its own transaction: a message is marked sent only after
GitHub answered, and every kind is idempotent on GitHub's side, so a drain killed between
the two sends it again without duplicating anything. Transient trouble (5xx, rate limits,
a network cut) leaves the message pending with a backoff; a token GitHub rejects leaves
it pending too (nothing is lost while the operator fixes the setting) and ends the round,
since every other write would be refused the same way. With no token the drain is a dry
run: each write is stored with what it would have posted, and nothing is sent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.commands import culprits, outbox, pin_reports
from service.commands.pr_runs import run_link
from service.config import Settings
from service.domain.pr_comment import (
    MARKER,
    BreakageReport,
    QuarantinedFailure,
    pr_page_url,
    render,
)
from service.domain.public_text import public_text
from service.github.analysis import rank_range, ranking_note, suspects_json
from service.github.client import GitHubClient
from service.github.errors import GitHubConfigError, GitHubUnavailable
from service.models import (
    Backend,
    Breakage,
    BreakageStatus,
    Failure,
    OutboxKind,
    OutboxMessage,
    Run,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReportSettings:
    repo: str
    label: str
    min_score: float
    public_url: str
    unlabel_on_fix: bool
    # False: a dry run (no token): writes are stored, not sent.
    can_write: bool
    # Label on the score alone (OOTCI_LABEL_UNVERIFIED), not only a confirmed suspect.
    label_unverified: bool = False


@dataclass
class DrainResult:
    sent: int = 0
    dry_run: int = 0
    retried: int = 0
    errors: list[str] = field(default_factory=list)


def breakage_url(public_url: str, breakage_id: int) -> str | None:
    return f"{public_url.rstrip('/')}/breakages/{breakage_id}" if public_url else None


def _analyse(session: Session, message: OutboxMessage, github: GitHubClient, cfg: ReportSettings) -> dict[str, Any]:
    breakage = session.get(Breakage, message.payload["breakage_id"])
    if breakage is None or not (breakage.range_base_sha and breakage.range_head_sha):
        return {"skipped": "the breakage is gone or has no range"}
    failures = session.scalars(select(Failure).where(Failure.breakage_id == breakage.id))
    ranking = rank_range(github, failures, breakage.range_base_sha, breakage.range_head_sha)
    culprits.store_suspects(
        session,
        breakage,
        suspects_json(ranking),
        ranking_note(ranking, breakage.range_base_sha, breakage.range_head_sha),
        repo=cfg.repo,
        min_score=cfg.min_score,
    )
    return {"commits": ranking.commits_considered, "suspects": len(ranking.suspects),
            "confidence": str(ranking.confidence)}


def pr_reports(session: Session, pr: int, cfg: ReportSettings) -> list[BreakageReport]:
    reports = []
    for breakage in culprits.breakages_on_pr(session, pr, cfg.min_score):
        backend = session.get(Backend, breakage.backend_id)
        decisive = session.scalar(
            select(Failure.line)
            .where(Failure.breakage_id == breakage.id, Failure.quarantined.is_(False))
            .order_by(Failure.id.desc()).limit(1)
        )
        dispute = next((d for d in breakage.disputes or [] if int(d["pr"]) == pr), None)
        top = (next((c for c in breakage.culprits if c.get("pr") == pr), breakage.culprits[0])
               if dispute else culprits.reported_suspect(breakage) or breakage.culprits[0])
        verification = top.get("verification") or {}
        reports.append(
            BreakageReport(
                breakage_id=breakage.id,
                backend=backend.name if backend else str(breakage.backend_id),
                category=breakage.category or "unknown",
                subtype=breakage.subtype,
                title=breakage.title,
                decisive_line=decisive or "",
                base_version=breakage.range_base_version,
                head_version=breakage.range_head_version,
                base_sha=breakage.range_base_sha,
                head_sha=breakage.range_head_sha,
                occurrences=breakage.occurrences,
                resolved=breakage.status != BreakageStatus.OPEN,
                score=float(top["score"]),
                reasons=tuple(top.get("reasons", ())),
                url=breakage_url(cfg.public_url, breakage.id),
                verification=verification.get("state"),
                evidence=verification.get("evidence"),
                disputed_by=dispute["by"] if dispute else None,
                dispute_reason=dispute["reason"] if dispute else None,
            )
        )
    return reports


def quarantined_failures(
    session: Session, pr: int, cfg: ReportSettings, *, limit: int = 20
) -> list[QuarantinedFailure]:
    """The quarantined failures of the open breakages' newest red runs: listed on the
    comment apart from the breakages, never as one."""
    open_ones = [b for b in culprits.breakages_on_pr(session, pr, cfg.min_score)
                 if b.status != BreakageStatus.RESOLVED and b.last_seen_run_id is not None]
    run_ids = {b.last_seen_run_id for b in open_ones}
    if not run_ids:
        return []
    rows = session.execute(
        select(Failure.run_id, Failure.nodeid, Failure.line, Backend.name)
        .join(Run, Run.id == Failure.run_id)
        .join(Backend, Backend.id == Run.backend_id)
        .where(Failure.run_id.in_(run_ids), Failure.quarantined.is_(True))
        .order_by(Backend.name, Failure.id).limit(limit)
    ).all()
    return [
        QuarantinedFailure(backend=name, run_id=run_id, nodeid=nodeid,
                           line=public_text(line or "", cfg.public_url),
                           url=run_link(cfg.public_url, run_id))
        for run_id, nodeid, line, name in rows
    ]


def pr_body(session: Session, pr: int, reports: list[BreakageReport], cfg: ReportSettings) -> str:
    """The comment as it is posted: the PR's public page linked, quarantined failures apart."""
    return render(pr, reports, page_url=pr_page_url(cfg.public_url, pr),
                  quarantined=quarantined_failures(session, pr, cfg))


def label_op(reports: list[BreakageReport], cfg: ReportSettings) -> str:
    """What the PR's label does: added while a break is open and confirmed by undoing the
    PR (any open one, with ``label_unverified``: on score alone), removed once all are
    resolved when ``unlabel_on_fix``; else kept as it is. A score is not a verdict, and
    a label is a public accusation, so a person's dispute ("not this PR") of every open
    break it was suspected of takes it off whatever ``unlabel_on_fix`` says."""
    open_ones = [r for r in reports if r.accuses]
    if open_ones:
        return "add" if cfg.label_unverified or any(r.confirmed for r in open_ones) else "keep"
    if any(r.disputed_by and not r.resolved for r in reports):
        return "remove"
    return "remove" if cfg.unlabel_on_fix else "keep"


def _report_pr(session: Session, message: OutboxMessage, github: GitHubClient, cfg: ReportSettings) -> dict[str, Any]:
    pr = int(message.payload["pr"])
    reports = pr_reports(session, pr, cfg)
    if not reports:
        return {"skipped": "no breakage names this PR any more"}
    body = pr_body(session, pr, reports, cfg)
    op = label_op(reports, cfg)
    result: dict[str, Any] = {"pr": pr, "label": cfg.label, "label_op": op, "body": body}
    if not cfg.can_write:
        return result
    if op == "add":
        github.add_label(pr, cfg.label)
    comment_id, url, created = github.upsert_comment(pr, MARKER, body)
    if op == "remove":
        github.remove_label(pr, cfg.label)
    return {**result, "comment_id": comment_id, "comment_url": url, "created": created}


def _status(session: Session, message: OutboxMessage, github: GitHubClient, cfg: ReportSettings) -> dict[str, Any]:
    # The link and the description are made public here, whatever was queued (a message
    # queued before, or under another OOTCI_PUBLIC_URL): only the public URL is linked.
    p = message.payload
    run_id = p.get("run_id")
    link = run_link(cfg.public_url, int(run_id)) if isinstance(run_id, int) else None
    sent = {**p, "description": public_text(str(p["description"]), cfg.public_url),
            "target_url": link}
    if cfg.can_write:
        github.set_status(sent["sha"], sent["state"], sent["context"], sent["description"], link)
    return sent


def _pin_bump(session: Session, message: OutboxMessage, github: GitHubClient, cfg: ReportSettings) -> dict[str, Any]:
    """The one bump PR on the vendor's repository: opened, updated in place, or closed when
    the base branch already holds the proposed pin."""
    p = message.payload
    result: dict[str, Any] = {"repo": p["repo"], "branch": p["branch"], "path": p["path"],
                              "content": p["content"]}
    if not cfg.can_write:
        pin_reports.record_bump_pr(session, int(p["report_id"]), {**result, "dry_run": True})
        return result
    answer = github.upsert_pull_request(
        p["repo"], p["branch"], p["base"], p["path"], p["content"], p["title"], p["body"]
    )
    if answer is None:
        result["closed"] = True
    else:
        number, url, created = answer
        result.update(number=number, url=url, created=created)
    pin_reports.record_bump_pr(session, int(p["report_id"]), result)
    return result


_HANDLERS: dict[str, Callable[[Session, OutboxMessage, GitHubClient, ReportSettings], dict[str, Any]]] = {
    OutboxKind.CULPRIT: _analyse,
    OutboxKind.PR_REPORT: _report_pr,
    OutboxKind.STATUS: _status,
    OutboxKind.PIN_BUMP: _pin_bump,
}
# Analysis only reads GitHub: it runs in a dry run too, so the dashboard shows suspects.
_WRITES = {OutboxKind.PR_REPORT, OutboxKind.STATUS, OutboxKind.PIN_BUMP}


def drain(
    sessions: Callable[[], Session], github: GitHubClient, cfg: ReportSettings, *, limit: int = 100
) -> DrainResult:
    """Send the due messages, oldest first; each committed on its own."""
    result = DrainResult()
    for _ in range(limit):
        with sessions() as session:
            due = outbox.due(session, limit=1)
            if not due:
                break
            message = due[0]
            try:
                answer = _HANDLERS[message.kind](session, message, github, cfg)
            except GitHubConfigError as exc:
                session.rollback()
                _retry_later(sessions, message.id, str(exc), None)
                result.errors.append(str(exc))
                log.error("outbox: %s; stopping this round", exc)
                break
            except GitHubUnavailable as exc:
                session.rollback()
                _retry_later(sessions, message.id, str(exc), None)
                result.retried += 1
                result.errors.append(str(exc))
                continue
            if message.kind in _WRITES and not cfg.can_write:
                outbox.mark_dry_run(message, answer)
                result.dry_run += 1
            else:
                outbox.mark_sent(message, answer)
                result.sent += 1
            session.commit()
    return result


def _retry_later(sessions: Callable[[], Session], message_id: int, error: str, wait_s: float | None) -> None:
    with sessions() as session:
        message = session.get(OutboxMessage, message_id)
        if message is not None:
            outbox.mark_retry(message, error, wait_s=wait_s)
            session.commit()


def report_settings(settings: Settings) -> ReportSettings:
    return ReportSettings(
        repo=settings.upstream_repo,
        label=settings.github_label,
        min_score=settings.culprit_min_score,
        public_url=settings.public_url,
        unlabel_on_fix=settings.github_unlabel_on_fix,
        can_write=bool(settings.github_token.get_secret_value()),
        label_unverified=settings.label_unverified,
    )


def drain_with_settings(
    settings: Settings, sessions: Callable[[], Session], *, max_retries: int | None = None
) -> DrainResult:
    """The drain as the worker task and the embedded mode run it."""
    github = GitHubClient.from_settings(settings, max_retries=max_retries)
    return drain(sessions, github, report_settings(settings))


def drain_quietly(settings: Settings, sessions: Callable[[], Session]) -> DrainResult | None:
    """Send what a finished run queued, in the embedded mode. One try per message: someone
    is waiting at the terminal, and a GitHub that cannot be reached now is tried again by
    the next drain (the next run, `ootci report`). A report never fails the run."""
    try:
        return drain_with_settings(settings, sessions, max_retries=0)
    except Exception:
        log.exception("outbox: drain failed; the messages stay queued")
        return None
