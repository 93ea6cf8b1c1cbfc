"""`kill -9` of `ootci run` and of `ootci serve` mid-build: the run is finished by the next
sweep exactly once, and nothing of the killed attempt keeps running (checked by PID)."""

from __future__ import annotations

import uuid
from pathlib import Path

from sqlalchemy import Engine, select

from service.commands.runs import create_run, get_or_create_backend
from service.config import Settings
from service.db import make_engine, session_scope
from service.migrate import upgrade
from service.models import Run, Step
from tests.support.faults import (
    kill_9,
    let_build_finish,
    ootci,
    pids_with,
    start_ootci,
    write_fault_backend,
)
from tests.support.live_server import free_port
from tests.support.processes import answers
from tests.support.waiting import wait_until


def _engine(home: Path) -> Engine:
    return make_engine(Settings(home=home).resolved_database_url)


def _the_run(engine: Engine) -> Run:
    with session_scope(engine) as s:
        return s.scalars(select(Run)).one()


def _is_build(pid: int) -> bool:
    try:
        return b"build_script.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_a_killed_ootci_run_leaves_no_build_behind_and_resume_finishes_it_once(
    tmp_path: Path,
) -> None:
    marker = f"ootci-fault-{uuid.uuid4().hex}"
    backend = write_fault_backend(tmp_path / "faulty", marker)
    home = tmp_path / "home"
    runner = start_ootci(home, "run", "--torch", "installed", "--backend", str(backend),
                         log=tmp_path / "run.log")
    try:
        # The build and the grandchild it started are running.
        wait_until(lambda: len(pids_with(marker)) >= 3, 120, "the build and its grandchild")
    finally:
        kill_9(runner)
    engine = _engine(home)
    # The build process dies with its parent (PR_SET_PDEATHSIG via bwrap/setpriv/preexec).
    wait_until(lambda: not [p for p in pids_with(marker) if _is_build(p)], 10, "the build to die")
    survivors_now = pids_with(marker)
    run = _the_run(engine)
    assert (run.state, run.runner_pid) == ("running", runner.pid)

    # The next ootci process of this host sweeps: the run ends errored infra, once.
    listing = ootci(home, "runs", "--json")
    assert listing.returncode == 0, listing.stderr
    let_build_finish(backend)
    resumed = ootci(home, "resume", "--json")
    assert resumed.returncode == 0, (resumed.stdout[-3000:], resumed.stderr)
    run = _the_run(engine)
    assert (run.state, run.attempts) == ("passed", 2)
    with session_scope(engine) as s:
        # The resumed attempt started over: one build step, its own; the killed attempt's
        # steps stay as its history, the build never closed.
        rows = s.scalars(select(Step).where(Step.run_id == run.id).order_by(Step.id)).all()
        assert [st.name for st in rows if st.attempt == 2] == [
            "provision", "build", "test", "collect",
        ]
        assert [(st.name, st.status) for st in rows if st.attempt == 1][-1] == ("build", "running")
    # Nothing of the killed attempt is left (its grandchild was reaped by the next attempt
    # if the sandbox's pid namespace had not already taken it down).
    assert pids_with(marker) == [], survivors_now
    again = ootci(home, "resume")
    assert again.returncode == 0 and "nothing to resume" in again.stdout


def test_a_killed_ootci_serve_run_is_taken_over_by_the_next_sweep_exactly_once(
    tmp_path: Path,
) -> None:
    marker = f"ootci-fault-{uuid.uuid4().hex}"
    backend = write_fault_backend(tmp_path / "faulty", marker)
    home = tmp_path / "home"
    engine = _engine(home)
    upgrade(engine)
    with session_scope(engine) as s:
        be = get_or_create_backend(s, "faulty", str(backend))
        create_run(s, be, "installed", trigger="api")
    # A lease (10 min) far longer than the test waits: only the sweep's check of the dead
    # PID frees the run in time.
    settings = {"OOTCI_RUN_LEASE_S": "600", "OOTCI_EMBEDDED_SWEEP_S": "1"}
    first_port, second_port = free_port(), free_port()
    first = start_ootci(home, "serve", "--port", str(first_port), log=tmp_path / "serve1.log",
                        **settings)
    second = None
    try:
        # The first server takes the queued run at start and builds.
        wait_until(lambda: len(pids_with(marker)) >= 3, 120, "the first server's build")
        claimed_by = _the_run(engine).claimed_by
        assert claimed_by is not None and claimed_by.endswith(f":{first.pid}")
        # A second server on the same home leaves a run whose server lives alone ...
        second = start_ootci(home, "serve", "--port", str(second_port),
                             log=tmp_path / "serve2.log", **settings)
        wait_until(lambda: answers(f"http://127.0.0.1:{second_port}/healthz"), 60, "the second server")
        assert _the_run(engine).claimed_by == claimed_by
        kill_9(first)
        wait_until(lambda: not [p for p in pids_with(marker) if _is_build(p)], 10, "the build to die")
        let_build_finish(backend)
        # ... and its periodic sweep takes the dead server's run over, once.
        wait_until(lambda: _the_run(engine).state == "passed", 120, "the run to pass")
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                kill_9(proc)
    run = _the_run(engine)
    assert run.attempts == 2
    with session_scope(engine) as s:
        names = [st.name for st in s.scalars(select(Step).where(Step.run_id == run.id,
                                                               Step.attempt == 2).order_by(Step.id))]
    assert names == ["provision", "build", "test", "collect"]
    assert pids_with(marker) == []
