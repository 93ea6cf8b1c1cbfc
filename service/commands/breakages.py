"""Group failures into Breakages across nights, and resolve them when they stop happening.

A Breakage is keyed by (backend, fingerprint, fingerprint version). A run adds an
occurrence to each breakage its failures match, and the breakage's category becomes what
triage said of them in that run (the worst of its failures there, by the one severity
order): the newest evidence speaks, as when an isolating run settles an unknown; an open breakage is resolved by a later
finished run of the same backend on a torch spec where the breakage was seen, if that run
no longer shows the fingerprint (the fix landed, upstream or in the backend).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.commands.upsert import insert_or_ignore
from service.domain.fingerprint import mask_paths
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
            if breakage.status == BreakageStatus.RESOLVED:
                # It came back: reopen rather than start a second history.
                breakage.status = BreakageStatus.OPEN
                breakage.resolved_at = None
                breakage.resolved_by_run_id = None
    return list(touched.values())


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
