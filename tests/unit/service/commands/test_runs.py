"""Claiming runs: exactly one worker wins, leases expire, finished runs stay finished."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import Engine

from service.commands.runs import (
    claim_run,
    create_run,
    get_or_create_backend,
    renew_lease,
    requeue_for_retry,
    retry_delay_s,
    stale_run_ids,
)
from service.db import session_scope
from service.models import IllegalTransition, Run, RunState, utcnow


def _queued(engine: Engine) -> int:
    with session_scope(engine) as s:
        backend = get_or_create_backend(s, "b", "/src/b")
        return create_run(s, backend, "installed", trigger="test").id


def test_only_one_worker_claims_a_queued_run(engine: Engine) -> None:
    run_id = _queued(engine)
    with session_scope(engine) as s:
        assert claim_run(s, run_id, "w1", lease_s=600)
    with session_scope(engine) as s:
        assert not claim_run(s, run_id, "w2", lease_s=600)
        run = s.get_one(Run, run_id)
        assert (run.state, run.claimed_by, run.attempts) == (RunState.RUNNING, "w1", 1)


def test_an_expired_lease_can_be_reclaimed_and_the_old_owner_loses_it(engine: Engine) -> None:
    run_id = _queued(engine)
    t0 = utcnow()
    with session_scope(engine) as s:
        assert claim_run(s, run_id, "w1", lease_s=60, now=t0)
    with session_scope(engine) as s:
        assert not claim_run(s, run_id, "w2", lease_s=60, now=t0 + dt.timedelta(seconds=30))
    with session_scope(engine) as s:
        assert run_id in stale_run_ids(s, queued_older_than_s=3600, now=t0 + dt.timedelta(seconds=61))
        assert claim_run(s, run_id, "w2", lease_s=60, now=t0 + dt.timedelta(seconds=61))
    with session_scope(engine) as s:
        assert not renew_lease(s, run_id, "w1", 60)
        assert renew_lease(s, run_id, "w2", 60)
        assert s.get_one(Run, run_id).attempts == 2


def test_finished_runs_are_never_claimed_again(engine: Engine) -> None:
    run_id = _queued(engine)
    with session_scope(engine) as s:
        assert claim_run(s, run_id, "w1", lease_s=60)
        s.get_one(Run, run_id).transition(RunState.PASSED)
    with session_scope(engine) as s:
        far = utcnow() + dt.timedelta(days=1)
        assert not claim_run(s, run_id, "w2", lease_s=60, now=far)
        run = s.get_one(Run, run_id)
        assert run.state == RunState.PASSED and run.finished_at is not None
        with pytest.raises(IllegalTransition):
            run.transition(RunState.RUNNING)


def test_a_run_requeued_for_retry_is_not_claimed_or_swept_before_its_time(engine: Engine) -> None:
    run_id = _queued(engine)
    t0 = utcnow()
    with session_scope(engine) as s:
        assert claim_run(s, run_id, "w1", lease_s=600, now=t0)
        requeue_for_retry(s, s.get_one(Run, run_id), delay_s=300, error="infra error: pip", now=t0)
    with session_scope(engine) as s:
        run = s.get_one(Run, run_id)
        assert (run.state, run.claimed_by, run.lease_expires_at) == (RunState.QUEUED, None, None)
        assert run.error == "infra error: pip"
        assert not claim_run(s, run_id, "w2", lease_s=600, now=t0 + dt.timedelta(seconds=299))
        # The sweeper counts a waiting run's age from its retry time, not its creation.
        assert run_id not in stale_run_ids(s, queued_older_than_s=60, now=t0 + dt.timedelta(seconds=330))
        assert run_id in stale_run_ids(s, queued_older_than_s=60, now=t0 + dt.timedelta(seconds=361))
    with session_scope(engine) as s:
        assert claim_run(s, run_id, "w2", lease_s=600, now=t0 + dt.timedelta(seconds=300))
        run = s.get_one(Run, run_id)
        assert (run.attempts, run.retry_at, run.claimed_by) == (2, None, "w2")


def test_retry_delays_double_up_to_a_day() -> None:
    assert [retry_delay_s(n, 300) for n in (1, 2, 3)] == [300, 600, 1200]
    assert retry_delay_s(20, 300) == 86400
