"""Inputs that can never work are the user's, not the machine's: a clear error, exit 2 (or
422), no run kept, never retried. Each used to be an internal error, a retried infra error
or a misread path."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import select

from service.commands.runs import create_run, get_or_create_backend
from service.config import Settings
from service.db import make_engine, session_scope
from service.migrate import upgrade
from service.models import Run
from tests.support.faults import ootci
from tests.support.pyonly import write_pyonly_backend
from workers.pipeline.execute import execute_run

SUITE = {"test_ok.py": "def test_ok():\n    pass\n"}


def _no_runs(home: Path) -> bool:
    listing = ootci(home, "runs", "--json")
    return listing.returncode == 0 and json.loads(listing.stdout)["total"] == 0


def test_a_pip_requirement_that_selects_no_torch_is_a_usage_error(tmp_path: Path) -> None:
    backend = write_pyonly_backend(tmp_path / "pyonly", SUITE)
    home = tmp_path / "home"
    result = ootci(home, "run", "--backend", str(backend), "--torch",
                   'pip:torch; python_version < "3"')
    assert result.returncode == 2, result.stderr
    assert "selects no torch" in result.stderr and "Traceback" not in result.stderr
    assert _no_runs(home)


def test_a_wheel_that_is_not_a_zip_is_a_usage_error_and_never_retried(tmp_path: Path) -> None:
    backend = write_pyonly_backend(tmp_path / "pyonly", SUITE)
    wheel = tmp_path / "torch-2.13.0-py3-none-any.whl"
    wheel.write_bytes(b"<html>404 not found</html>")
    home = tmp_path / "home"
    result = ootci(home, "run", "--backend", str(backend), "--torch", f"wheel:{wheel}")
    assert result.returncode == 2, result.stderr
    assert "is not a valid wheel" in result.stderr
    assert _no_runs(home)

    # A worker (which retries infra) ends it at once.
    engine = make_engine(f"sqlite:///{tmp_path / 'worker.db'}")
    upgrade(engine)
    settings = Settings(home=tmp_path / "worker", database_url=str(engine.url), infra_retries=3)
    with session_scope(engine) as s:
        run_id = create_run(s, get_or_create_backend(s, "pyonly", str(backend)),
                            f"wheel:{wheel}", trigger="api").id
    assert execute_run(engine, settings, run_id, "w1", retry_infra=True) == "errored"
    with session_scope(engine) as s:
        run = s.scalars(select(Run)).one()
        assert run.attempts == 1 and run.retry_at is None
        assert run.error is not None and run.error.startswith("usage error:")
        # The kind, not the text, is what the verdict and `ootci run` go by.
        assert (run.error_kind, run.verdict) == ("usage", "unknown")


def test_a_wheel_url_of_another_scheme_is_refused_before_any_run(tmp_path: Path) -> None:
    backend = write_pyonly_backend(tmp_path / "pyonly", SUITE)
    home = tmp_path / "home"
    result = ootci(home, "run", "--backend", str(backend), "--torch",
                   "wheel:ftp://mirror.example/torch-2.13.0-py3-none-any.whl")
    assert result.returncode == 2
    assert "ftp:// is not supported" in result.stderr
    assert _no_runs(home)
