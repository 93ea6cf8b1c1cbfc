"""A worker whose lease was taken over (it stalled past the lease; another worker claimed
the run) stops its attempt at the next heartbeat: its build is killed and it writes
nothing more on a run that is no longer its own."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest
from sqlalchemy import select, update

from service.commands.runs import create_run, get_or_create_backend
from service.config import Settings
from service.db import make_engine, session_scope
from service.migrate import upgrade
from service.models import Run, Step
from tests.support.faults import pids_with, write_fault_backend
from tests.support.waiting import wait_until
from workers.pipeline import execute, run_context


def test_a_lost_lease_stops_the_attempt_and_kills_its_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_context, "LEASE_RENEW_EVERY_S", 0.5)  # beat fast: the test is short
    marker = f"ootci-fault-{uuid.uuid4().hex}"
    backend = write_fault_backend(tmp_path / "faulty", marker)
    engine = make_engine(f"sqlite:///{tmp_path / 'ootci.db'}")
    upgrade(engine)
    settings = Settings(home=tmp_path / "home", database_url=str(engine.url), sandbox=False)
    with session_scope(engine) as s:
        run_id = create_run(s, get_or_create_backend(s, "faulty", str(backend)),
                            "installed", trigger="api").id
    result: list[str | None] = []
    worker = threading.Thread(
        target=lambda: result.append(execute.execute_run(engine, settings, run_id, "w1"))
    )
    worker.start()
    wait_until(lambda: pids_with(marker), 120, "the build")
    with session_scope(engine) as s:
        # What a second worker's claim of an expired lease leaves.
        s.execute(update(Run).where(Run.id == run_id).values(claimed_by="w2"))
    worker.join(30)
    assert not worker.is_alive()
    assert result == [None]
    wait_until(lambda: not pids_with(marker), 10, "the build and its grandchild to die")
    with session_scope(engine) as s:
        run = s.get_one(Run, run_id)
        assert (run.state, run.claimed_by, run.error) == ("running", "w2", None)
        build = s.scalars(select(Step).where(Step.name == "build")).one()
        assert build.status == "running"  # w2's to redo: the old attempt did not write it
