"""What a run stores when bwrap cannot set up a sealed step other than the build (issue
#33): the test step's pytest, provision's ``import torch`` probe. The step and the run are
an infra error naming the sandbox and bwrap's reason; nothing is stored as a test's
failure, a breakage, an ``unknown`` "no rule matched" or upstream's broken torch. Real
pipeline, real bwrap, SQLite and Postgres; the one seam is the dir removed after the
sandbox's check (``tests/support/vanishing.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from service.commands.runs import create_run, get_or_create_backend
from service.config import Settings
from service.db import session_scope
from service.models import Breakage, Failure, Run, TestResult
from tests.support.pyonly import write_pyonly_backend
from tests.support.vanishing import Vanishing
from workers.pipeline import execute
from workers.pipeline.execute import execute_run
from workers.pipeline.isolation.sandbox import StepSandbox, probe

CANNOT = "ootci: sandbox: cannot set up the sandbox: bwrap: Can't find source path"
PASSING = {"test_ok.py": "def test_ok():\n    assert True\n"}


@pytest.fixture
def settings(engine: Engine, tmp_path: Path) -> Settings:
    settings = Settings(home=tmp_path / "home", database_url=str(engine.url), broker_url="",
                        default_torch="installed", test_processes=1)
    if probe(settings.sandbox_uid, settings.bwrap).bwrap is None:
        pytest.skip("no working bwrap")
    return settings


def _run(engine: Engine, settings: Settings, backend: Path) -> int:
    with session_scope(engine) as s:
        run_id = create_run(s, get_or_create_backend(s, "pyonly", str(backend)), "installed",
                            trigger="api").id
    assert execute_run(engine, settings, run_id, "w1") == "errored"
    return run_id


def _assert_stored_as_the_sandboxes(engine: Engine, run_id: int, step: str) -> None:
    with Session(engine) as s:
        run = s.get_one(Run, run_id)
        assert (run.state, run.error_kind, run.verdict) == ("errored", "infra", "infra")
        assert (run.error or "").startswith(f"infra error: {CANNOT}"), run.error
        (row,) = [st for st in run.steps if st.name == step]
        assert row.status == "errored"
        assert row.summary.startswith(CANNOT), row.summary
        assert CANNOT in row.read_log().decode()
        # Nothing blamed on anyone: no failure row, no test result, no breakage.
        assert s.scalars(select(Failure).where(Failure.run_id == run_id)).all() == []
        assert s.scalars(select(TestResult).where(TestResult.run_id == run_id)).all() == []
        assert s.scalars(select(Breakage)).all() == []


def test_a_test_step_bwrap_cannot_start_is_stored_as_infra(
    engine: Engine, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend = write_pyonly_backend(tmp_path / "pyonly", PASSING)
    doomed = tmp_path / "doomed"
    real = execute._sandbox_for_suite

    def vanishing_suite_sandbox(*args: object) -> StepSandbox:
        sandbox = real(*args)  # type: ignore[arg-type]
        return Vanishing(replace(sandbox, writable=(*sandbox.writable, doomed)), doomed,
                         which="-m pytest")  # type: ignore[return-value]

    monkeypatch.setattr(execute, "_sandbox_for_suite", vanishing_suite_sandbox)
    run_id = _run(engine, settings, backend)
    _assert_stored_as_the_sandboxes(engine, run_id, "test")
    with Session(engine) as s:
        build = next(st for st in s.get_one(Run, run_id).steps if st.name == "build")
        assert build.status == "passed"  # the build ran; only the tests' sandbox broke


def test_provisions_probe_bwrap_cannot_start_is_stored_as_infra_never_upstream(
    engine: Engine, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend = write_pyonly_backend(tmp_path / "pyonly", PASSING)
    doomed = tmp_path / "doomed"
    real = execute.probe_sandbox

    def vanishing_probe_sandbox(*args: object) -> object:
        make = real(*args)  # type: ignore[arg-type]

        def sandbox_for(reads: Sequence[Path], writes: Sequence[Path]) -> StepSandbox:
            sandbox = make(reads, [*writes, doomed])
            return Vanishing(sandbox, doomed)  # type: ignore[return-value]

        return sandbox_for

    monkeypatch.setattr(execute, "probe_sandbox", vanishing_probe_sandbox)
    run_id = _run(engine, settings, backend)
    _assert_stored_as_the_sandboxes(engine, run_id, "provision")
    with Session(engine) as s:
        run = s.get_one(Run, run_id)
        assert run.torch_build_id is None and "torch does not import" not in (run.error or "")
        assert [st.name for st in run.steps] == ["provision"]
