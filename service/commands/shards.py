"""Commands on a run's test shards: create, claim (with a lease), renew, finish, release.

Claiming is one conditional UPDATE, like a run's (``runs.claim_run``): two workers racing
for one shard cannot both win. A shard is claimable while its run is running: queued, or
running under a lease that ran out (its worker died; whoever claims it runs it again).
Functions take a session and never commit.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import CursorResult, delete, exists, or_, select, update
from sqlalchemy.orm import Session

from service.models import Run, RunState, ShardState, TestShard, utcnow


def create_shards(
    session: Session,
    run_id: int,
    parts: Sequence[Sequence[str]],
    artefact: dict[str, Any],
) -> list[int]:
    """The run's shards, one per part (any earlier attempt's are dropped first); returns
    their indexes."""
    session.execute(delete(TestShard).where(TestShard.run_id == run_id))
    everything = [path for part in parts for path in part]
    for index, part in enumerate(parts):
        session.add(TestShard(run_id=run_id, index=index, files=list(part),
                              all_files=everything, artefact=artefact))
    session.flush()
    return list(range(len(parts)))


def claim_shard(
    session: Session, run_id: int, index: int, worker_id: str, lease_s: int,
    *, now: dt.datetime | None = None,
) -> TestShard | None:
    """Take a shard of a running run: queued, or running under an expired lease. None when
    it is done, leased by a live worker, or its run is no longer running."""
    now = now or utcnow()
    run_running = exists().where(Run.id == run_id, Run.state == RunState.RUNNING)
    result: CursorResult[Any] = session.execute(  # type: ignore[assignment]
        update(TestShard)
        .where(
            TestShard.run_id == run_id,
            TestShard.index == index,
            run_running,
            or_(
                TestShard.state == ShardState.QUEUED,
                (TestShard.state == ShardState.RUNNING) & (TestShard.lease_expires_at < now),
            ),
        )
        .values(state=ShardState.RUNNING, claimed_by=worker_id,
                lease_expires_at=now + dt.timedelta(seconds=lease_s))
        .execution_options(synchronize_session=False)
    )
    if not result.rowcount:
        return None
    return session.scalars(
        select(TestShard).where(TestShard.run_id == run_id, TestShard.index == index)
    ).one()


def renew_shard(session: Session, shard_id: int, worker_id: str, lease_s: int) -> bool:
    """Extend our lease on a running shard. False: it is no longer ours."""
    result: CursorResult[Any] = session.execute(  # type: ignore[assignment]
        update(TestShard)
        .where(TestShard.id == shard_id, TestShard.claimed_by == worker_id,
               TestShard.state == ShardState.RUNNING)
        .values(lease_expires_at=utcnow() + dt.timedelta(seconds=lease_s))
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount)


def finish_shard(session: Session, shard_id: int, worker_id: str, result: dict[str, Any]) -> bool:
    """Store a shard's result, if it is still ours (a worker that lost its lease stores
    nothing: the one that took the shard over does)."""
    done: CursorResult[Any] = session.execute(  # type: ignore[assignment]
        update(TestShard)
        .where(TestShard.id == shard_id, TestShard.claimed_by == worker_id,
               TestShard.state == ShardState.RUNNING)
        .values(state=ShardState.DONE, result=result, finished_at=utcnow(),
                lease_expires_at=None)
        .execution_options(synchronize_session=False)
    )
    return bool(done.rowcount)


def release_shard(session: Session, shard_id: int, worker_id: str) -> None:
    """Hand a claimed shard back to the queue (this worker cannot run it: the artefact is
    not on its disk); the run's owner, which built it, then runs it."""
    session.execute(
        update(TestShard)
        .where(TestShard.id == shard_id, TestShard.claimed_by == worker_id,
               TestShard.state == ShardState.RUNNING)
        .values(state=ShardState.QUEUED, claimed_by=None, lease_expires_at=None)
        .execution_options(synchronize_session=False)
    )


def shards_of(session: Session, run_id: int) -> list[TestShard]:
    return list(session.scalars(
        select(TestShard).where(TestShard.run_id == run_id).order_by(TestShard.index)
    ))
