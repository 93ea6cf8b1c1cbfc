"""A run leaves its dir behind (its venv, HOME, TMPDIR); once nobody used it for the cache's
max age it is removed, by the next run's own clean-up or by `ootci gc`, the most recent ones
stay, and the removed run's logs are still readable: they live in the database."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.commands.runs import create_run, get_or_create_backend
from service.config import Settings
from service.db import make_engine, session_scope
from service.migrate import upgrade
from service.models import Run
from tests.support.faults import ootci
from tests.support.pyonly import write_pyonly_backend
from workers.pipeline.cache.layout import STAMP
from workers.pipeline.execute import execute_run

pytest_plugins = ["tests.support.dirs"]

SUITE = {"test_ok.py": "def test_ok():\n    assert 1 + 1 == 2\n"}


def _run(engine: Engine, settings: Settings, backend: Path) -> Path:
    with session_scope(engine) as s:
        run_id = create_run(s, get_or_create_backend(s, "pyonly", str(backend)), "installed",
                            trigger="cli").id
    assert execute_run(engine, settings, run_id, "w1") == "passed"
    return settings.resolved_work_dir / "runs" / str(run_id)


def _age(run_dir: Path, days: float) -> None:
    when = time.time() - days * 86400
    os.utime(run_dir / STAMP, (when, when))


def _test_log(engine: Engine, run_dir: Path) -> str:
    with Session(engine) as s:
        run = s.get_one(Run, int(run_dir.name))
        return next(st for st in run.steps if st.name == "test").read_log().decode()


def test_old_run_dirs_are_removed_and_their_logs_stay(world_readable_dir: Path) -> None:
    backend = write_pyonly_backend(world_readable_dir / "pyonly", SUITE)
    settings = Settings(home=world_readable_dir / "home", database_url="", broker_url="",
                        test_processes=1, cache_keep=1, cache_max_age_days=7)
    engine = make_engine(settings.resolved_database_url)
    upgrade(engine)
    try:
        first = _run(engine, settings, backend)
        # What a run leaves: its private venv and its logs, stamped as used.
        assert (first / "env").is_dir() and (first / "test.log").is_file()
        assert time.time() - (first / STAMP).stat().st_mtime < 300

        # A week and a day later the next run cleans up before it provisions.
        _age(first, 8)
        second = _run(engine, settings, backend)
        assert not first.exists() and second.exists()
        assert "1 passed" in _test_log(engine, first)

        # `ootci gc` does the same on demand: --dry-run lists, then it removes.
        third = _run(engine, settings, backend)
        _age(second, 8)
        dry = ootci(settings.home, "gc", "--dry-run", "--json", OOTCI_CACHE_KEEP="1")
        assert dry.returncode == 0, dry.stderr
        listed = [(r["path"], r["kind"]) for r in json.loads(dry.stdout)["removed"]]
        assert listed == [(str(second), "run")] and second.exists()
        done = ootci(settings.home, "gc", OOTCI_CACHE_KEEP="1")
        assert done.returncode == 0, done.stderr
        assert f"removed run {second}" in done.stdout
        assert not second.exists() and third.exists()
        assert "1 passed" in _test_log(engine, second)
    finally:
        engine.dispose()
