"""An attempt that fails on infrastructure puts the run back in the queue with a backoff,
as many times as settings.infra_retries allows; the last failure ends it errored. The real
pipeline against a package index that refuses connections, on SQLite and Postgres."""

from __future__ import annotations

import datetime as dt
import socket
from pathlib import Path

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from service.commands.runs import create_run, get_or_create_backend
from service.config import Settings
from service.db import session_scope
from service.models import Run, RunState, Step
from tests.support.pyonly import write_pyonly_backend
from workers.pipeline.execute import execute_run


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _setup(engine: Engine, tmp_path: Path, retries: int) -> tuple[Settings, int]:
    backend = write_pyonly_backend(tmp_path / "pyonly")
    settings = Settings(
        home=tmp_path / "home",
        database_url=str(engine.url),
        nightly_index_url=f"http://127.0.0.1:{_closed_port()}/simple",
        infra_retries=retries,
        infra_retry_delay_s=60,
    )
    with session_scope(engine) as s:
        be = get_or_create_backend(s, "pyonly", str(backend))
        run_id = create_run(s, be, "nightly", trigger="api").id
    return settings, run_id


def test_infra_failures_requeue_the_run_until_the_budget_is_spent(
    engine: Engine, tmp_path: Path
) -> None:
    settings, run_id = _setup(engine, tmp_path, retries=1)
    before = dt.datetime.now(dt.UTC)
    assert execute_run(engine, settings, run_id, "w1", retry_infra=True) == RunState.QUEUED
    with Session(engine) as s:
        run = s.get_one(Run, run_id)
        assert (run.state, run.attempts, run.claimed_by, run.verdict) == ("queued", 1, None, None)
        assert run.error_kind == "infra"
        assert run.retry_at is not None
        assert dt.timedelta(seconds=59) <= run.retry_at - before <= dt.timedelta(seconds=70)
        assert run.error is not None
        assert run.error.startswith("infra error on attempt 1 of 2, retrying in 60 s:")
        assert "package index unreachable" in run.error
        # The failed attempt stays visible while the run waits.
        assert [(st.name, st.status) for st in run.steps] == [("provision", "errored")]

    # Not before its time: another worker's message finds nothing to do.
    assert execute_run(engine, settings, run_id, "w2", retry_infra=True) is None

    with session_scope(engine) as s:
        s.get_one(Run, run_id).retry_at = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    assert execute_run(engine, settings, run_id, "w2", retry_infra=True) == RunState.ERRORED
    with Session(engine) as s:
        run = s.get_one(Run, run_id)
        assert (run.attempts, run.verdict, run.retry_at) == (2, "infra", None)
        assert run.error_kind == "infra"
        assert run.error is not None
        assert run.error.startswith("infra error on the last of 2 attempts:")
        # The second attempt started over: one provision step of its own; the first
        # attempt's is kept as its history.
        rows = s.scalars(select(Step).where(Step.run_id == run_id).order_by(Step.id)).all()
        assert [(st.attempt, st.name) for st in rows] == [(1, "provision"), (2, "provision")]
        assert [st.attempt for st in run.steps] == [2]


def test_without_retries_an_infra_failure_ends_the_run_at_once(
    engine: Engine, tmp_path: Path
) -> None:
    settings, run_id = _setup(engine, tmp_path, retries=2)
    # An interactive `ootci run` (retry_infra off) reports the failure rather than wait.
    assert execute_run(engine, settings, run_id, "cli") == RunState.ERRORED
    with Session(engine) as s:
        run = s.get_one(Run, run_id)
        assert (run.attempts, run.verdict, run.retry_at, run.error_kind) == (1, "infra", None, "infra")
        assert run.error is not None and run.error.startswith("infra error: ")
