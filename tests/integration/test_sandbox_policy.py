"""The sandbox fails closed (issue #33 item 1): where no working sandbox can be made,
``ootci run`` refuses with one line and exit 2 before writing anything, and a Celery worker
refuses to start; with ``--no-sandbox`` the run goes ahead and every surface marks it
unsandboxed. "No working sandbox" is made real with ``OOTCI_BWRAP=/bin/false``: a bwrap
that cannot set up any namespace, as under Docker's default seccomp profile."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.api.app import create_app
from service.commands.runs import create_run, get_or_create_backend
from service.config import Settings
from service.db import session_scope
from service.dispatch import InProcessDispatcher
from service.models import Run
from tests.support.cli import ootci
from tests.support.paths import REPO_ROOT
from tests.support.processes import celery_worker
from tests.support.pyonly import write_pyonly_backend
from workers.pipeline.execute import execute_run

BROKEN_BWRAP = {"OOTCI_BWRAP": "/bin/false"}
PASSING = {"test_ok.py": "def test_ok():\n    assert True\n"}


@pytest.fixture
def backend(tmp_path: Path) -> Path:
    return write_pyonly_backend(tmp_path / "pyonly", PASSING)


def _runs_dir_entries(home: Path) -> list[Path]:
    return [p for p in home.rglob("*") if p.is_dir() and p.parent.name == "runs"]


def test_run_without_a_working_sandbox_is_refused_and_writes_nothing(
    tmp_path: Path, backend: Path,
) -> None:
    done = ootci(tmp_path, "run", "--backend", str(backend), "--torch", "installed",
                 **BROKEN_BWRAP)
    assert done.returncode == 2, done.stdout + done.stderr
    said = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
    assert len(said) == 1, said
    assert "no working sandbox" in said[0] and "/bin/false" in said[0]
    assert "--no-sandbox" in said[0] and "OOTCI_SANDBOX=off" in said[0]
    # Refused before the database or a run dir was made.
    home = tmp_path / "home"
    assert not list(home.glob("*.db")) and not _runs_dir_entries(home)


def test_no_sandbox_runs_and_every_surface_marks_it(tmp_path: Path, backend: Path) -> None:
    done = ootci(tmp_path, "run", "--backend", str(backend), "--torch", "installed",
                 "--no-sandbox", "--json", **BROKEN_BWRAP)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sandbox is off" in done.stderr or "sandbox is off" in done.stdout
    (run,) = json.loads(done.stdout[done.stdout.index("["):])
    assert run["state"] == "passed" and run["sandboxed"] is False

    shown = ootci(tmp_path, "show", str(run["id"]), "--json")
    assert json.loads(shown.stdout)["sandboxed"] is False

    settings = Settings(home=tmp_path / "home")
    with TestClient(create_app(settings, dispatcher=InProcessDispatcher(lambda _: None))) as client:
        assert client.get(f"/api/runs/{run['id']}").json()["sandboxed"] is False
        page = client.get(f"/runs/{run['id']}").text
        assert 'id="unsandboxed"' in page and "--no-sandbox" in page


def test_a_sandboxed_run_says_so(tmp_path: Path, backend: Path) -> None:
    done = ootci(tmp_path, "run", "--backend", str(backend), "--torch", "installed", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = json.loads(done.stdout[done.stdout.index("["):])
    assert run["sandboxed"] is True
    settings = Settings(home=tmp_path / "home")
    with TestClient(create_app(settings, dispatcher=InProcessDispatcher(lambda _: None))) as client:
        assert 'id="unsandboxed"' not in client.get(f"/runs/{run['id']}").text


def test_a_worker_without_a_sandbox_does_not_start(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
        "OOTCI_HOME": str(tmp_path / "home"), "OOTCI_BROKER_URL": "memory://",
        **BROKEN_BWRAP,
    }
    done = subprocess.run(celery_worker("nosandbox"), cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "ootci worker: no working sandbox" in done.stderr
    # It never got as far as consuming: no "ready" from Celery.
    assert "ready." not in done.stderr


def test_an_opted_out_worker_starts(tmp_path: Path) -> None:
    """The same broken bwrap with OOTCI_SANDBOX=off: the worker comes up (and is stopped)."""
    env = {
        "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
        "OOTCI_HOME": str(tmp_path / "home"), "OOTCI_BROKER_URL": "memory://",
        "OOTCI_SANDBOX": "off", **BROKEN_BWRAP,
    }
    proc = subprocess.Popen(celery_worker("optedout"), cwd=REPO_ROOT, env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if "ready." in line:
                break
        assert any("ready." in ln for ln in seen), "".join(seen[-20:])
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_a_sandbox_that_broke_after_start_ends_the_run_as_infra_before_any_step(
    engine: Engine, tmp_path: Path, backend: Path,
) -> None:
    """The worker path asks again: a run claimed where the sandbox no longer works ends
    errored (infra, the machine's fault, never the backend's or upstream's) with the same
    line, and none of the backend's steps ran."""
    settings = Settings(home=tmp_path / "home", database_url=str(engine.url), broker_url="",
                        default_torch="installed", bwrap="/bin/false")
    with session_scope(engine) as s:
        run_id = create_run(s, get_or_create_backend(s, "pyonly", str(backend)), "installed",
                            trigger="api").id
    assert execute_run(engine, settings, run_id, "w1") == "errored"
    with Session(engine) as s:
        run = s.get_one(Run, run_id)
        assert run.error_kind == "infra" and run.verdict == "infra"
        assert "no working sandbox" in (run.error or "")
        assert [st.name for st in run.steps] == []
