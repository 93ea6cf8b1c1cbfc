"""A torch that does not import in a fresh env (a broken nightly) is upstream's break: the
run ends failed with the verdict upstream/torch-unusable and the innermost error as its
evidence, and the workers do not retry it as infra. The real pipeline, on SQLite and
Postgres, with a real wheel whose torch/__init__.py raises."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from service.commands.runs import create_run, get_or_create_backend
from service.config import Settings
from service.db import session_scope
from service.models import Failure, Run
from tests.support.fake_torch import BROKEN_INIT, build_wheel
from tests.support.pyonly import write_pyonly_backend
from workers.pipeline.execute import execute_run


def test_a_torch_that_does_not_import_is_upstream_torch_unusable_not_infra(
    engine: Engine, tmp_path: Path
) -> None:
    wheel = build_wheel(tmp_path / "wheels", "2.14.0.dev20261126+cpu", "c" * 40, {},
                        init=BROKEN_INIT)
    backend = write_pyonly_backend(tmp_path / "pyonly", {"test_ok.py": "def test_ok():\n    pass\n"})
    settings = Settings(home=tmp_path / "home", database_url=str(engine.url), broker_url="",
                        infra_retries=2)
    with session_scope(engine) as s:
        run_id = create_run(
            s, get_or_create_backend(s, "pyonly", str(backend)), f"wheel:{wheel}", trigger="api"
        ).id

    assert execute_run(engine, settings, run_id, "w1", retry_infra=True) == "failed"
    with Session(engine) as s:
        run = s.get_one(Run, run_id)
        assert (run.state, run.attempts, run.verdict, run.verdict_subtype) == (
            "failed", 1, "upstream", "torch-unusable")
        assert run.retry_at is None
        assert [(st.name, st.status) for st in run.steps] == [
            ("provision", "failed"), ("collect", "passed")]
        (failure,) = s.scalars(select(Failure).where(Failure.run_id == run_id))
        assert (failure.stage, failure.category, failure.subtype, failure.rule) == (
            "provision", "upstream", "torch-unusable", "torch-unusable")
        # The innermost error, not the RuntimeError torch wrapped it in.
        assert failure.captures["exception"] == "ModuleNotFoundError"
        assert failure.captures["cause"] == "No module named 'torch._C_missing'"
