"""A full disk mid-build (a small tmpfs as the work dir): the attempt ends errored infra
with the reason, every step row closed, and the run is retried once there is space again;
the retry writes and classifies its own log, not the failed attempt's."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from sqlalchemy import Engine, select

from service.commands.runs import create_run, get_or_create_backend
from service.config import Settings
from service.db import make_engine, session_scope
from service.migrate import upgrade
from service.models import Run, Step
from tests.support.faults import fill_disk, let_build_finish, small_disk, write_fault_backend
from workers.pipeline.execute import execute_run

BUILD_LINES = 3000  # ~330 KB of log: more than the full disk has left


def _steps(engine: Engine, run_id: int) -> list[tuple[str, str, str]]:
    with session_scope(engine) as s:
        rows = s.scalars(select(Step).where(Step.run_id == run_id).order_by(Step.id))
        return [(st.name, st.status, st.summary or "") for st in rows]


def test_a_full_disk_is_infra_every_step_closed_and_retried_once_space_returns(
    tmp_path: Path,
) -> None:
    backend = write_fault_backend(tmp_path / "faulty", f"ootci-fault-{uuid.uuid4().hex}")
    let_build_finish(backend, BUILD_LINES)
    engine = make_engine(f"sqlite:///{tmp_path / 'ootci.db'}")
    upgrade(engine)
    with small_disk(tmp_path / "disk", size_kb=2048) as disk:
        settings = Settings(
            home=tmp_path / "home", database_url=str(engine.url), work_dir=disk,
            infra_retries=2, infra_retry_delay_s=1,
        )
        with session_scope(engine) as s:
            run_id = create_run(s, get_or_create_backend(s, "faulty", str(backend)),
                                "installed", trigger="api").id
        filler = fill_disk(disk, leave_kb=96)

        assert execute_run(engine, settings, run_id, "w1", retry_infra=True) == "queued"
        with session_scope(engine) as s:
            run = s.get_one(Run, run_id)
            assert (run.state, run.attempts) == ("queued", 1)
            assert run.error is not None and "disk full" in run.error
            assert "infra error on attempt 1 of 3" in run.error
        steps = _steps(engine, run_id)
        assert all(status != "running" for _, status, _ in steps), steps
        assert ("build", "errored") in [(name, status) for name, status, _ in steps]
        assert any("disk full" in summary for _, _, summary in steps), steps

        filler.unlink()
        time.sleep(1.2)  # the retry's backoff
        assert execute_run(engine, settings, run_id, "w2", retry_infra=True) == "passed"
        with session_scope(engine) as s:
            run = s.get_one(Run, run_id)
            assert (run.state, run.attempts, run.verdict) == ("passed", 2, "compatible")
            build = s.scalars(select(Step).where(Step.run_id == run_id, Step.name == "build",
                                                 Step.attempt == 2)).one()
            assert build.log_path is not None and build.log_path.endswith("build.attempt2.log")
            # The retry's log is its own: exactly its lines, none of the failed attempt's.
            assert build.read_log().decode().count("\nline ") == BUILD_LINES
        assert (disk / "runs" / str(run_id) / "build.log").exists()
