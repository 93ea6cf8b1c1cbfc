"""The main job end to end through the real CLI: provision the installed torch, build a
backend with its real compiler, run its suite, and find everything in the database.

Runs on SQLite and on Postgres. The build cache is shared across the tests of a session
(as on a real worker), so only the first build of each backend is cold.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from service.db import make_engine, session_scope
from service.models import Failure, Run, Step, TestResult

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "backends"


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ootci-cache")


def ootci_run(
    home: Path, cache: Path, db_url: str, backend: Path, *extra: str
) -> tuple[int, Any, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    env.update(
        OOTCI_HOME=str(home), OOTCI_CACHE_DIR=str(cache), OOTCI_DATABASE_URL=db_url,
        COLUMNS="200",
        # A first night's failure is isolated on another pin: with the default pin that is a
        # torch from the package index (test_isolation.py isolates on purpose).
        OOTCI_PINS='["installed"]',
    )
    proc = subprocess.run(
        [sys.executable, "-m", "service.cli", "run", "--torch", "installed",
         "--backend", str(backend), "--json", *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600,
    )
    # `ootci run --json` prints a list of runs, one per torch spec: here one.
    data = json.loads(proc.stdout)[0] if proc.stdout.strip().startswith("[") else None
    return proc.returncode, data, proc.stderr


def test_bundled_backend_is_green_and_stored(
    tmp_path: Path, shared_cache: Path, db_url: str
) -> None:
    code, run, stderr = ootci_run(tmp_path, shared_cache, db_url, ROOT / "backend")
    assert run is not None, stderr[-3000:]
    failures = [(f["nodeid"], f["line"][:200]) for f in run["failures"]]
    assert (code, run["state"]) == (0, "passed"), failures[:10]
    assert [s["name"] for s in run["steps"]] == ["provision", "build", "test", "collect"]
    assert run["torch_build"]["version"].startswith(__import__("torch").__version__.split("+")[0])
    assert run["torch_build"]["git_version"] == __import__("torch").version.git_version

    engine = make_engine(db_url)
    with session_scope(engine) as s:
        row = s.get_one(Run, run["id"])
        assert row.state == "passed" and row.torch_build is not None
        results = s.scalars(select(TestResult).where(TestResult.run_id == row.id)).all()
        assert len(results) >= 100
        assert {r.outcome for r in results} <= {"passed", "skipped", "flaky"}
        suites = {r.suite for r in results}
        assert {"test_device", "test_memory", "test_ops"} <= suites
        build = s.scalars(select(Step).where(Step.run_id == row.id, Step.name == "build")).one()
        assert b"torch_openreg" in build.read_log()
    engine.dispose()


def test_compile_error_is_recorded_with_its_line(
    tmp_path: Path, shared_cache: Path, db_url: str
) -> None:
    code, run, stderr = ootci_run(tmp_path, shared_cache, db_url, FIXTURES / "broken_compile")
    assert run is not None, stderr[-3000:]
    assert (code, run["state"]) == (1, "failed")
    steps = {s["name"]: s["status"] for s in run["steps"]}
    assert steps["build"] == "failed" and "test" not in steps
    (failure,) = run["failures"]
    assert failure["stage"] == "build"
    assert "error:" in failure["line"] and "override" in failure["line"]
    assert failure["subtype"] == "signature-changed"
    assert failure["line_no"] and failure["fingerprint"]


def test_segfault_and_hang_are_crashes_and_the_rest_is_kept(
    tmp_path: Path, shared_cache: Path, db_url: str
) -> None:
    code, run, stderr = ootci_run(tmp_path, shared_cache, db_url, FIXTURES / "segfault")
    assert run is not None, stderr[-3000:]
    assert (code, run["state"]) == (1, "failed")
    engine = make_engine(db_url)
    with session_scope(engine) as s:
        outcomes = dict(
            s.execute(
                select(TestResult.nodeid, TestResult.outcome).where(TestResult.run_id == run["id"])
            ).all()
        )
        crashed = sorted(n for n, o in outcomes.items() if o == "crashed")
        assert len(crashed) == 2, outcomes
        # Tests after the crash and the hang still ran and kept their real outcome.
        assert sum(o == "passed" for o in outcomes.values()) >= 3
        assert outcomes["tests/test_a_crashes.py::test_a6_after_hang_fails"] == "failed"
        subtypes = set(s.scalars(select(Failure.subtype).where(Failure.run_id == run["id"])))
        # The segfault is a crash; the hang killed by the per-test timeout is a timeout.
        assert {"crash", "timeout"} <= subtypes
        red = [n for n, o in outcomes.items() if o not in ("passed", "skipped")]
        assert s.scalar(select(func.count()).select_from(Failure).where(
            Failure.run_id == run["id"])) == len(red)
    engine.dispose()
