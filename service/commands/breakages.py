"""Group failures into Breakages across nights, and resolve them when they stop happening.

A Breakage is keyed by (backend, fingerprint, fingerprint version). A run adds an
occurrence to each breakage its failures match, and the breakage's category becomes what
triage said of them in that run (the worst of its failures there, by the one severity
order): the newest evidence speaks, as when an isolating run settles an unknown; an open breakage is resolved by a later
finished run of the same backend on a torch spec where the breakage was seen, if that run
no longer shows the fingerprint (the fix landed, upstream or in the backend). A breakage
a person closed (``service.commands.triage_actions``) reopens the same way when it recurs;
one snoozed until a torch version wakes up when a newer torch shows it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.commands.upsert import insert_or_ignore
from service.domain.fingerprint import mask_paths
from service.domain.triage_actions import is_snoozed, torch_ends_snooze
from service.domain.verdict import Category, severity_rank
from service.models import Breakage, BreakageStatus, Failure, Run, utcnow

# Flakes and infra trouble are not breakages of the integration path.
NOT_A_BREAKAGE = {"flake", "infra"}


def _title(failure: Failure) -> str:
    """What names the breakage: its subtype and the capture that names the break (a crash
    by its signature), else the failure's line; never a path of one machine's env, cache
    or run dir, which would make the same break read differently on every home."""
    captures = failure.captures or {}
    subject = next(
        (str(captures[k]) for k in ("crash", "symbol", "header", "class", "test", "op")
         if captures.get(k)),
        failure.nodeid or "",
    )
    kind = failure.subtype or failure.triage or "failure"
    return mask_paths(f"{kind}: {subject}" if subject else f"{kind}: {failure.line[:200]}")


def record_occurrences(session: Session, run: Run, failures: Iterable[Failure]) -> list[Breakage]:
    """Attach each failure to its breakage (created on first sight). Counts one occurrence
    per run, however many tests of the run share the fingerprint."""
    now = run.finished_at or utcnow()
    touched: dict[int, Breakage] = {}
    grouped = [f for f in failures if f.fingerprint and f.triage not in NOT_A_BREAKAGE]
    # The breakage's category: triage's, never the rule's (that is only a suggestion).
    triaged: dict[tuple[str | None, int], str] = {}
    for failure in grouped:
        fkey = (failure.fingerprint, failure.fingerprint_version or 0)
        category = failure.triage or Category.UNKNOWN.value
        if fkey not in triaged or severity_rank(category) < severity_rank(triaged[fkey]):
            triaged[fkey] = category
    for failure in grouped:
        category = triaged[(failure.fingerprint, failure.fingerprint_version or 0)]
        key = {
            "backend_id": run.backend_id,
            "fingerprint": failure.fingerprint,
            "fingerprint_version": failure.fingerprint_version or 0,
        }
        # Two runs of one backend may first-sight the same fingerprint at once.
        insert_or_ignore(
            session,
            Breakage,
            {
                **key,
                "category": category,
                "subtype": failure.subtype,
                "title": _title(failure),
                "captures": dict(failure.captures or {}),
                "first_seen_run_id": run.id,
                "first_seen_at": now,
                "last_seen_at": now,
                "occurrences": 0,
                "status": BreakageStatus.OPEN,
            },
            conflict_on=list(key),
        )
        breakage = session.scalars(
            select(Breakage).where(
                Breakage.backend_id == key["backend_id"],
                Breakage.fingerprint == key["fingerprint"],
                Breakage.fingerprint_version == key["fingerprint_version"],
            )
        ).one()
        failure.breakage_id = breakage.id
        if breakage.id not in touched:
            touched[breakage.id] = breakage
            breakage.category = category
            # In SQL, not Python: concurrent runs each add theirs.
            breakage.occurrences = Breakage.occurrences + 1
            breakage.last_seen_run_id = run.id
            breakage.last_seen_at = now
            if breakage.status != BreakageStatus.OPEN:
                # It came back: reopen rather than start a second history.
                reopened(breakage)
            seen_on = run.torch_build.version if run.torch_build else None
            if torch_ends_snooze(breakage.snoozed_until_torch, seen_on):
                breakage.snoozed_until_torch = None
    return list(touched.values())


def reopened(b: Breakage) -> None:
    """Open again, by a person or because it recurred: the earlier end is forgotten."""
    b.status = BreakageStatus.OPEN
    b.resolved_at = b.resolved_by_run_id = None
    b.closed_at = b.closed_by = b.close_reason = None


def is_muted(b: Breakage, now: dt.datetime | None = None) -> bool:
    """Snoozed: no label, comment or notification goes out about it."""
    return is_snoozed(b.snoozed_until, b.snoozed_until_torch, now or utcnow())


def resolve_fixed(
    session: Session, run: Run, seen_fingerprints: set[str], observed_stages: set[str]
) -> list[Breakage]:
    """Resolve the backend's open breakages this run shows fixed (see module docstring).

    Only stages the run actually got through count: a run whose build failed says nothing
    about test breakages, so those stay open."""
    resolved = []
    open_ones = session.scalars(
        select(Breakage).where(
            Breakage.backend_id == run.backend_id, Breakage.status == BreakageStatus.OPEN
        )
    )
    for breakage in open_ones:
        if breakage.fingerprint in seen_fingerprints:
            continue
        seen = session.execute(
            select(Run.torch_spec, Failure.stage)
            .join(Failure, Failure.run_id == Run.id)
            .where(Failure.breakage_id == breakage.id)
        ).all()
        specs = {spec for spec, _ in seen}
        stages = {stage for _, stage in seen}
        if run.torch_spec in specs and stages <= observed_stages:
            breakage.status = BreakageStatus.RESOLVED
            breakage.resolved_at = run.finished_at or utcnow()
            breakage.resolved_by_run_id = run.id
            resolved.append(breakage)
    return resolved
