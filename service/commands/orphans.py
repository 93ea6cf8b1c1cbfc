"""Runs whose process died on this host: the embedded mode's sweep (no Celery to redeliver).

- An interactive runner (``ootci run``) recorded its host and PID on its runs; when that
  PID is gone, its unfinished runs end ``errored`` with an infra verdict saying so, and
  ``ootci resume`` puts them back in the queue (:func:`resume`).
- A serving process (``ootci serve``) claimed its runs as ``host:pid``; when that PID is
  gone, the lease is expired now rather than hours later, so the sweep re-dispatches them.

Liveness is asked of the caller (``is_alive``): only it knows how to probe a PID.
Functions take a session and never commit.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import CursorResult, select, update
from sqlalchemy.orm import Session

from service.models import Run, RunState, utcnow

ORPHAN_ERROR = "infra error: the ootci process running it (pid {pid} on {host}) died; `ootci resume` continues it"
_ORPHAN_MARK = "infra error: the ootci process running it"
_UNFINISHED = (RunState.QUEUED, RunState.RUNNING)

PidProbe = Callable[[int], bool]
# A runner's PID and the start time it recorded (None for rows of older versions): a PID
# reused by another process since is no longer the runner's.
RunnerProbe = Callable[[int, int | None], bool]


def record_runner(
    session: Session, run_ids: Iterable[int], *, host: str, pid: int, started: int | None = None
) -> None:
    """This interactive process (started at ``started``, see RunnerProbe) executes these runs."""
    ids = list(run_ids)
    if ids:
        session.execute(
            update(Run).where(Run.id.in_(ids))
            .values(runner_host=host, runner_pid=pid, runner_started=started)
            .execution_options(synchronize_session=False)
        )


def end_runs_of_dead_runners(
    session: Session, *, host: str, is_alive: RunnerProbe, now: dt.datetime | None = None
) -> list[int]:
    """End the unfinished runs of this host's dead interactive runners as errored infra
    (each once: the UPDATE is conditional on the run still being unfinished)."""
    now = now or utcnow()
    candidates = session.execute(
        select(Run.id, Run.runner_pid, Run.runner_started).where(
            Run.runner_host == host, Run.runner_pid.is_not(None), Run.state.in_(_UNFINISHED)
        )
    ).all()
    ended = []
    for run_id, pid, started in candidates:
        if pid is None or is_alive(pid, started):
            continue
        result: CursorResult[Any] = session.execute(  # type: ignore[assignment]
            update(Run)
            .where(Run.id == run_id, Run.runner_pid == pid, Run.state.in_(_UNFINISHED))
            .values(
                state=RunState.ERRORED,
                finished_at=now,
                claimed_by=None,
                lease_expires_at=None,
                retry_at=None,
                verdict="infra",
                error=ORPHAN_ERROR.format(pid=pid, host=host),
                error_kind="infra",
                verdict_reason=ORPHAN_ERROR.format(pid=pid, host=host),
            )
            .execution_options(synchronize_session=False)
        )
        if result.rowcount:
            ended.append(run_id)
    return ended


def expire_leases_of_dead_workers(
    session: Session, *, host: str, is_alive: PidProbe, now: dt.datetime | None = None
) -> list[int]:
    """Expire the leases of running runs claimed by a dead process of this host (claimed_by
    is ``host:pid``), interactive runners excepted (they are ended instead)."""
    now = now or utcnow()
    rows = session.execute(
        select(Run.id, Run.claimed_by).where(
            Run.state == RunState.RUNNING,
            Run.runner_pid.is_(None),
            Run.claimed_by.like(f"{host}:%"),
            Run.lease_expires_at >= now,
        )
    ).all()
    expired = []
    for run_id, claimed_by in rows:
        pid_text = str(claimed_by).removeprefix(f"{host}:")
        if not pid_text.isdigit() or is_alive(int(pid_text)):
            continue
        session.execute(
            update(Run)
            .where(Run.id == run_id, Run.claimed_by == claimed_by, Run.state == RunState.RUNNING)
            .values(lease_expires_at=now - dt.timedelta(seconds=1))
            .execution_options(synchronize_session=False)
        )
        expired.append(run_id)
    return expired


def orphaned_run_ids(session: Session, *, host: str) -> list[int]:
    """The runs a dead interactive runner of this host left, as ended by the sweep."""
    return list(
        session.scalars(
            select(Run.id).where(
                Run.state == RunState.ERRORED,
                Run.runner_host == host,
                Run.error.startswith(_ORPHAN_MARK),
            ).order_by(Run.id)
        )
    )


def resume(
    session: Session, run_id: int, *, host: str, pid: int, started: int | None = None
) -> bool:
    """Put a run the sweep ended as orphaned back in the queue, owned by this runner. The one
    way out of ``errored``, and only for that error; False if it is not such a run (any
    more: two resumes of one run cannot both win)."""
    result: CursorResult[Any] = session.execute(  # type: ignore[assignment]
        update(Run)
        .where(
            Run.id == run_id,
            Run.state == RunState.ERRORED,
            Run.error.startswith(_ORPHAN_MARK),
        )
        .values(
            state=RunState.QUEUED,
            finished_at=None,
            verdict=None,
            verdict_reason=None,
            error=None,
            error_kind=None,
            runner_host=host,
            runner_pid=pid,
            runner_started=started,
        )
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount)
