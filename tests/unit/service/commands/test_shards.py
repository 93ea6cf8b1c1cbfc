"""Claiming a run's test shards: one winner per shard, leases, hand-back, finished runs."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Engine

from service.commands.runs import claim_run, create_run, get_or_create_backend
from service.commands.shards import (
    claim_shard,
    create_shards,
    finish_shard,
    release_shard,
    renew_shard,
    shards_of,
)
from service.db import session_scope
from service.models import Run, RunState, ShardState, utcnow

LEASE_S = 60


def _running_run(engine: Engine) -> int:
    with session_scope(engine) as s:
        backend = get_or_create_backend(s, "b", "/src")
        run_id = create_run(s, backend, "installed", trigger="cli").id
    with session_scope(engine) as s:
        assert claim_run(s, run_id, "owner", LEASE_S)
    with session_scope(engine) as s:
        create_shards(s, run_id, [["/t/a.py"], ["/t/b.py", "/t/c.py"]], {"build_dir": "/b"})
    return run_id


def test_each_shard_has_one_winner_and_a_result_only_its_holder_stores(engine: Engine) -> None:
    run_id = _running_run(engine)
    with session_scope(engine) as s:
        first = claim_shard(s, run_id, 1, "w1", LEASE_S)
        assert first is not None and first.files == ["/t/b.py", "/t/c.py"]
        assert first.all_files == ["/t/a.py", "/t/b.py", "/t/c.py"]
        shard_id = first.id
    with session_scope(engine) as s:
        assert claim_shard(s, run_id, 1, "w2", LEASE_S) is None  # a live lease holds it
        assert renew_shard(s, shard_id, "w1", LEASE_S)
        assert not renew_shard(s, shard_id, "w2", LEASE_S)
        assert not finish_shard(s, shard_id, "w2", {"records": []})
        assert finish_shard(s, shard_id, "w1", {"records": []})
    with session_scope(engine) as s:
        assert claim_shard(s, run_id, 1, "w2", LEASE_S) is None  # done
        assert [sh.state for sh in shards_of(s, run_id)] == [ShardState.QUEUED, ShardState.DONE]


def test_an_expired_lease_lets_another_worker_take_the_shard_over(engine: Engine) -> None:
    run_id = _running_run(engine)
    with session_scope(engine) as s:
        dead = claim_shard(s, run_id, 0, "dead", LEASE_S)
        assert dead is not None
        dead_id = dead.id
    later = utcnow() + dt.timedelta(seconds=LEASE_S + 1)
    with session_scope(engine) as s:
        assert claim_shard(s, run_id, 0, "owner", LEASE_S, now=later) is not None
    with session_scope(engine) as s:
        assert not finish_shard(s, dead_id, "dead", {"records": []})  # no longer its


def test_a_handed_back_shard_is_queued_again(engine: Engine) -> None:
    run_id = _running_run(engine)
    with session_scope(engine) as s:
        shard = claim_shard(s, run_id, 0, "w2", LEASE_S)
        assert shard is not None
        release_shard(s, shard.id, "w2")
    with session_scope(engine) as s:
        assert claim_shard(s, run_id, 0, "owner", LEASE_S) is not None


def test_no_shard_of_a_finished_run_is_claimed(engine: Engine) -> None:
    run_id = _running_run(engine)
    with session_scope(engine) as s:
        s.get_one(Run, run_id).transition(RunState.ERRORED)
    with session_scope(engine) as s:
        assert claim_shard(s, run_id, 0, "w2", LEASE_S) is None
