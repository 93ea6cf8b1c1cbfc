"""The worker judges a PR run's wheel again, whatever the door let through: a row that names
a loopback http wheel (written before the rules, or by a door configured otherwise) ends
refused as the spec's fault and nothing is fetched."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from service.commands.runs import create_run, get_or_create_backend
from service.config import Settings
from service.db import session_scope
from service.models import Run
from tests.support.file_server import serve_directory
from tests.support.pyonly import write_pyonly_backend
from workers.pipeline.execute import execute_run


def test_a_pr_runs_loopback_wheel_is_refused_by_the_worker(tmp_path: Path, engine: Engine) -> None:
    source = write_pyonly_backend(tmp_path / "pyonly", {"test_x.py": "def test_x():\n    pass\n"})
    served = tmp_path / "www"
    served.mkdir()
    (served / "torch-2.14.0-py3-none-any.whl").write_bytes(b"PK")
    settings = Settings(home=tmp_path / "home", database_url=str(engine.url))
    with serve_directory(served) as url:
        wheel = f"{url}/torch-2.14.0-py3-none-any.whl"
        with session_scope(engine) as s:
            backend = get_or_create_backend(s, "pyonly", str(source))
            run_id = create_run(s, backend, f"wheel:{wheel}", trigger="webhook",
                                trigger_info={"pr": 1, "wheel_url": wheel, "wheel_source": "relay"}).id
        execute_run(engine, settings, run_id, "w-test")
    with session_scope(engine) as s:
        run = s.get_one(Run, run_id)
        assert run.state == "errored", run.error
        assert run.error is not None and "is not https" in run.error
        assert run.torch_build_id is None
    cached = settings.resolved_cache_dir / "wheels"
    assert not cached.exists() or not any(cached.rglob("*.whl"))
