"""A large suite's test step split into shards that two real Celery worker processes run at
once against the run's one build (Redis db 9, Postgres): one run, one verdict, the same
records as the suite run in one process, and no shard ever provisions or builds."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from service.commands.runs import create_run, get_or_create_backend
from service.db import make_engine, session_scope
from service.dispatch import CeleryDispatcher
from service.migrate import upgrade
from service.models import Run, ShardState, Step, TestResult, TestShard
from tests.support import redis_dbs
from tests.support.gates import gate_fixture  # noqa: F401 (the `gate` fixture)
from tests.support.processes import Processes, celery_worker
from tests.support.pyonly import write_pyonly_backend
from tests.support.waiting import empty_broker, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

REDIS_URL = redis_dbs.url(redis_dbs.TEST_SHARDS)
LEASE_S = 60  # the smallest lease settings accept: the takeover test waits it out once

# Six files of which one aborts the interpreter; each takes a couple of seconds, so both
# workers are busy with a shard at the same time.
SLOW_FILE = """\
import time


def test_slow_{n}():
    time.sleep(2)


def test_quick_{n}():
    assert {n} >= 0
"""
ABORTING_FILE = """\
import os


def test_before_abort():
    pass


def test_aborts():
    os.abort()


def test_after_abort():
    pass
"""
SUITE = {
    **{f"test_file_{n}.py": SLOW_FILE.format(n=n) for n in range(5)},
    "test_file_9_aborts.py": ABORTING_FILE,
}
EXPECTED = {
    **{f"tests/test_file_{n}.py::test_slow_{n}": "passed" for n in range(5)},
    **{f"tests/test_file_{n}.py::test_quick_{n}": "passed" for n in range(5)},
    "tests/test_file_9_aborts.py::test_before_abort": "passed",
    "tests/test_file_9_aborts.py::test_aborts": "crashed",
    "tests/test_file_9_aborts.py::test_after_abort": "passed",
}


@dataclass
class Workers:
    db_url: str
    tmp_path: Path
    processes: Processes

    @property
    def procs(self) -> dict[str, subprocess.Popen[bytes]]:
        return self.processes.procs

    def tail(self) -> str:
        return self.processes.tail()


@pytest.fixture
def workers(fresh_postgres_url: str, tmp_path: Path) -> Iterator[Workers]:
    """Two Celery worker processes sharing one OOTCI_HOME (the shared cache dir)."""
    broker = empty_broker(REDIS_URL)
    engine = make_engine(fresh_postgres_url)
    upgrade(engine)
    engine.dispose()
    logs = tmp_path / "logs"
    processes = Processes(logs)
    env = {
        **os.environ,
        "OOTCI_HOME": str(tmp_path / "home"),
        "OOTCI_DATABASE_URL": fresh_postgres_url,
        "OOTCI_BROKER_URL": REDIS_URL,
        "OOTCI_TEST_SHARDS": "2",
        "OOTCI_TEST_SHARD_MIN_FILES": "4",
        "OOTCI_TEST_PROCESSES": "1",  # the parallelism under test is across workers
        "OOTCI_RERUN_FAILED_TESTS": "false",
        "OOTCI_RUN_LEASE_S": str(LEASE_S),
        "PYTHONUNBUFFERED": "1",
    }
    try:
        for name in ("w1", "w2"):
            processes.start(name, celery_worker(name), env, log=f"worker-{name}")
        wait_until(lambda: all(b"ready" in p.read_bytes() for p in logs.glob("worker-*.log"))
              and len(list(logs.glob("worker-*.log"))) == 2,
              60, lambda: "both workers to be ready")
        yield Workers(fresh_postgres_url, tmp_path, processes)
    finally:
        processes.stop()
        broker.flushdb()
        broker.close()


def _start_run(workers: Workers, suite: dict[str, str]) -> tuple[Engine, int]:
    backend_dir = write_pyonly_backend(workers.tmp_path / "pyonly", suite)
    engine = make_engine(workers.db_url)
    with session_scope(engine) as s:
        backend = get_or_create_backend(s, "pyonly", str(backend_dir))
        run_id = create_run(s, backend, "installed", trigger="cli").id
    dispatcher = CeleryDispatcher(REDIS_URL)
    dispatcher.enqueue_run(run_id)
    dispatcher.close()
    return engine, run_id


def _finished(engine: Engine, run_id: int) -> Callable[[], str | None]:
    def finished() -> str | None:
        with Session(engine) as s:
            state = s.get_one(Run, run_id).state
        return state if state not in ("queued", "running") else None

    return finished


def test_two_workers_run_the_shards_of_one_run_against_one_build(workers: Workers) -> None:
    engine, run_id = _start_run(workers, SUITE)
    tail, finished = workers.tail, _finished(engine, run_id)

    state = wait_until(finished, 240, lambda: f"run {run_id} to finish\n{tail()}")
    with Session(engine) as s:
        run = s.get_one(Run, run_id)
        steps = list(s.scalars(select(Step).where(Step.run_id == run_id)))
        results = {r.nodeid: r.outcome
                   for r in s.scalars(select(TestResult).where(TestResult.run_id == run_id))}
        shards = list(s.scalars(select(TestShard).where(TestShard.run_id == run_id)
                                .order_by(TestShard.index)))
        test_log = next(st for st in steps if st.name == "test").read_log().decode()
        error = run.error
    engine.dispose()

    assert state == "failed", (error, tail())  # the abort is the backend's crash
    assert results == EXPECTED
    # One build, one test step, one verdict: the shards reused the run's artefact (the
    # first night's crash is then isolated on the pin, its own step).
    assert sorted(st.name for st in steps if st.name != "isolate") == [
        "build", "collect", "provision", "test"]
    assert test_log.count("nothing to compile") == 0
    # Two shards, each done, run by two different worker processes at once.
    assert [sh.state for sh in shards] == [ShardState.DONE, ShardState.DONE]
    ran_on = {sh.result["worker"] for sh in shards if sh.result is not None}
    assert len(ran_on) == 2, tail()
    spans = [(sh.result["began"], sh.result["ended"]) for sh in shards if sh.result is not None]
    assert max(b for b, _ in spans) < min(e for _, e in spans)  # they overlapped
    assert sorted(f for sh in shards for f in sh.files) == sorted(shards[0].all_files)
    assert "ran on" in test_log  # the other worker's shard log reaches the step's log


GATED_FILE = """\
import pathlib
import time

# Outside the tree and the host's /tmp (tests/support/gates.py): the sandbox sees it.
GATE = pathlib.Path("{gate}")


def test_waits_for_the_gate_{n}():
    deadline = time.monotonic() + 300
    while not GATE.exists():
        assert time.monotonic() < deadline, "gate never opened"
        time.sleep(0.1)
"""


def test_a_shard_whose_worker_dies_is_taken_over_by_the_runs_owner(
    workers: Workers, gate: Path
) -> None:
    suite = {f"test_gated_{n}.py": GATED_FILE.format(n=n, gate=gate) for n in range(4)}
    engine, run_id = _start_run(workers, suite)

    def both_shards_running() -> dict[int, str] | None:
        with Session(engine) as s:
            shards = list(s.scalars(select(TestShard).where(TestShard.run_id == run_id)))
        holders = {sh.index: sh.claimed_by for sh in shards if sh.state == ShardState.RUNNING}
        return holders if len(holders) == 2 and len(set(holders.values())) == 2 else None

    holders = wait_until(both_shards_running, 120, lambda: f"two shards running\n{workers.tail()}")
    with Session(engine) as s:
        owner = s.get_one(Run, run_id).claimed_by
    (helper_index, helper), = [(i, w) for i, w in holders.items() if w != owner]
    helper_pid = int(str(helper).rsplit(":", 1)[1])
    doomed = next(p for p in workers.procs.values() if os.getpgid(helper_pid) == p.pid)
    os.killpg(doomed.pid, signal.SIGKILL)
    doomed.wait(10)
    killed_at = time.monotonic()
    gate.touch()

    state = wait_until(_finished(engine, run_id), LEASE_S + 180,
                  lambda: f"run {run_id} to finish\n{workers.tail()}")
    with Session(engine) as s:
        results = {r.nodeid: r.outcome
                   for r in s.scalars(select(TestResult).where(TestResult.run_id == run_id))}
        shards = list(s.scalars(select(TestShard).where(TestShard.run_id == run_id)
                                .order_by(TestShard.index)))
        builds = list(s.scalars(select(Step).where(Step.run_id == run_id, Step.name == "build")))
    engine.dispose()
    assert state == "passed", workers.tail()
    assert results == {f"tests/test_gated_{n}.py::test_waits_for_the_gate_{n}": "passed"
                       for n in range(4)}
    # The dead worker's shard was run again by the owner once its lease ran out; no rebuild.
    assert shards[helper_index].result is not None
    assert shards[helper_index].result["worker"] == owner
    assert time.monotonic() - killed_at >= LEASE_S - 5
    assert len(builds) == 1
