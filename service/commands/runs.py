"""Commands on the Run aggregate: create, claim (with a lease), finish.

Functions take a session and never commit: the caller owns the unit of work. Claiming is
a single conditional UPDATE so two workers racing for one run cannot both win, on SQLite
and Postgres alike.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import CursorResult, func, or_, select, update
from sqlalchemy.orm import Session

from service.commands.upsert import insert_or_ignore
from service.models import Backend, Outcome, Run, RunState, TestResult, utcnow


def get_or_create_backend(
    session: Session, name: str, source: str, recipe: dict[str, Any] | None = None
) -> Backend:
    # Insert-or-ignore then re-read: concurrent first registrations of one name all succeed.
    added = insert_or_ignore(
        session, Backend, {"name": name, "source": source, "recipe": recipe or {}}, conflict_on=["name"]
    )
    backend = session.scalars(select(Backend).where(Backend.name == name)).one()
    if added is None:
        backend.source = source
        if recipe is not None:
            backend.recipe = recipe
    return backend


def create_run(
    session: Session,
    backend: Backend,
    torch_spec: str,
    *,
    trigger: str,
    trigger_info: dict[str, Any] | None = None,
    backend_sha: str | None = None,
    waiting_for: str | None = None,
    dedupe_key: str | None = None,
) -> Run:
    """A queued run, or with ``waiting_for`` (why) a waiting one no worker claims yet."""
    run = Run(
        backend_id=backend.id,
        torch_spec=torch_spec,
        trigger=trigger,
        trigger_info=trigger_info or {},
        backend_sha=backend_sha,
        state=RunState.WAITING if waiting_for else RunState.QUEUED,
        error=waiting_for,
        dedupe_key=dedupe_key,
    )
    session.add(run)
    session.flush()
    return run


@dataclass(frozen=True)
class RunRequestSpec:
    """One run to create: a backend against a torch spec, with why."""

    backend: Backend
    torch_spec: str
    trigger_info: dict[str, Any] = field(default_factory=dict)
    backend_sha: str | None = None
    # Made waiting, with this reason (a PR's wheel not published yet), instead of queued.
    waiting_for: str | None = None
    dedupe_key: str | None = None


def create_runs(session: Session, requests: Iterable[RunRequestSpec], *, trigger: str) -> list[int]:
    """Add the rows (flushed, not committed: the caller's unit of work decides)."""
    return [
        create_run(
            session,
            r.backend,
            r.torch_spec,
            trigger=trigger,
            trigger_info=r.trigger_info,
            backend_sha=r.backend_sha,
            waiting_for=r.waiting_for,
            dedupe_key=r.dedupe_key,
        ).id
        for r in requests
    ]


def claim_run(
    session: Session, run_id: int, worker_id: str, lease_s: int, *, now: dt.datetime | None = None
) -> bool:
    """Take ownership of a queued run (once its retry time, if any, has come), or of a
    running one whose lease has expired.

    Returns False when the run is finished or another worker holds a live lease: the
    caller must then do nothing (that is what makes ``acks_late`` redelivery idempotent).
    """
    now = now or utcnow()
    result: CursorResult[Any] = session.execute(  # type: ignore[assignment]
        update(Run)
        .where(
            Run.id == run_id,
            or_(
                (Run.state == RunState.QUEUED) & (Run.retry_at.is_(None) | (Run.retry_at <= now)),
                (Run.state == RunState.RUNNING) & (Run.lease_expires_at < now),
            ),
        )
        .values(
            state=RunState.RUNNING,
            claimed_by=worker_id,
            lease_expires_at=now + dt.timedelta(seconds=lease_s),
            started_at=now,
            attempts=Run.attempts + 1,
            retry_at=None,
        )
        .execution_options(synchronize_session=False)
    )
    claimed = bool(result.rowcount)
    if claimed:
        run = session.get(Run, run_id)
        if run is not None:
            session.refresh(run)
    return claimed


def renew_lease(session: Session, run_id: int, worker_id: str, lease_s: int) -> bool:
    """Extend a live lease (called as a long run makes progress). False = we lost the run."""
    result: CursorResult[Any] = session.execute(  # type: ignore[assignment]
        update(Run)
        .where(Run.id == run_id, Run.claimed_by == worker_id, Run.state == RunState.RUNNING)
        .values(lease_expires_at=utcnow() + dt.timedelta(seconds=lease_s))
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount)


def retry_delay_s(attempt: int, first_delay_s: int) -> int:
    """Backoff before the retry that follows failed attempt ``attempt`` (1-based): doubled
    each time, at most a day."""
    return int(min(first_delay_s * 2 ** (attempt - 1), 86400))


def requeue_for_retry(
    session: Session, run: Run, *, delay_s: int, error: str, now: dt.datetime | None = None
) -> None:
    """Hand a running run back to the queue after an attempt failed on infrastructure. No
    worker claims it for ``delay_s``; its error says why it waits, until an attempt ends it."""
    now = now or utcnow()
    run.transition(RunState.QUEUED, now=now)
    run.claimed_by = None
    run.lease_expires_at = None
    run.retry_at = now + dt.timedelta(seconds=delay_s)
    run.error = error[:4000]


def stale_run_ids(session: Session, *, queued_older_than_s: int, now: dt.datetime | None = None) -> list[int]:
    """Runs to re-dispatch: queued for too long (lost message; a run waiting to be retried
    counts from its retry time) or running with a dead lease."""
    now = now or utcnow()
    cutoff = now - dt.timedelta(seconds=queued_older_than_s)
    rows = session.scalars(
        select(Run.id).where(
            or_(
                (Run.state == RunState.QUEUED)
                & (func.coalesce(Run.retry_at, Run.created_at) < cutoff),
                (Run.state == RunState.RUNNING) & (Run.lease_expires_at < now),
            )
        )
    )
    return list(rows)


def plan_rerun(session: Session, run_id: int) -> int | None:
    """A new queued run (trigger ``rerun``) repeating a finished run's failed, errored and
    crashed tests (the pipeline runs the whole suite when there are none: a failed build,
    or failures that were no single test).
    None if the run does not exist, is unfinished or passed. Asking again while the rerun
    is pending returns the same run."""
    old = session.get(Run, run_id)
    if old is None or not RunState(old.state).finished or old.state == RunState.PASSED:
        return None
    pending = session.scalars(
        select(Run).where(
            Run.trigger == "rerun",
            Run.backend_id == old.backend_id,
            Run.state.in_([RunState.QUEUED, RunState.RUNNING]),
            Run.id > old.id,
        )
    )
    for run in pending:
        if run.trigger_info.get("rerun_of") == old.id:
            return run.id
    failed = list(
        session.scalars(
            select(TestResult.nodeid).where(
                TestResult.run_id == old.id,
                TestResult.outcome.in_(Outcome.FAILING),
                # "<collection>", "<import torch>"...: records of no single test, which
                # only the whole suite repeats.
                TestResult.nodeid.not_like("<%"),
            )
        )
    )
    backend = session.get_one(Backend, old.backend_id)
    new = create_run(
        session,
        backend,
        old.torch_spec,
        trigger="rerun",
        trigger_info={"rerun_of": old.id, "failed_tests": failed[:500]},
    )
    return new.id
