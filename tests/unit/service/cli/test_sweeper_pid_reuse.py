"""The orphan sweep and PID reuse: a runner is alive only while its PID is held by the
process that started at the recorded tick. A live process with the runner's PID but
another start time is a reused PID, and the dead runner's run is ended."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.cli.sweeper import process_started, runner_alive, sweep_once, this_host
from service.commands.orphans import record_runner
from service.commands.runs import claim_run, create_run, get_or_create_backend
from service.db import session_scope
from service.models import Run


@pytest.fixture
def live_process() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "60"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _running_run(engine: Engine, tmp_path: Path, pid: int, started: int | None) -> int:
    with session_scope(engine) as s:
        run_id = create_run(s, get_or_create_backend(s, "b", str(tmp_path)), "installed",
                            trigger="cli").id
    with session_scope(engine) as s:
        assert claim_run(s, run_id, f"{this_host()}:{pid}", 3600)
        record_runner(s, [run_id], host=this_host(), pid=pid, started=started)
    return run_id


def test_process_started_reads_a_real_start_tick(live_process: subprocess.Popen[bytes]) -> None:
    started = process_started(live_process.pid)
    assert started is not None and started > 0
    assert runner_alive(live_process.pid, started)
    assert not runner_alive(live_process.pid, started + 1)
    assert runner_alive(live_process.pid, None)  # rows of older versions: the PID alone


def test_a_reused_pid_does_not_keep_a_dead_runners_run_open(
    engine: Engine, tmp_path: Path, live_process: subprocess.Popen[bytes]
) -> None:
    pid = live_process.pid
    started = process_started(pid)
    assert started is not None
    ours = _running_run(engine, tmp_path / "a", pid, started)
    reused = _running_run(engine, tmp_path / "b", pid, started - 1)

    report = sweep_once(engine)
    assert report.orphaned == [reused]
    with Session(engine) as s:
        assert s.get_one(Run, ours).state == "running"
        run = s.get_one(Run, reused)
        assert (run.state, run.verdict) == ("errored", "infra")
        assert run.error is not None and f"pid {pid}" in run.error
