"""The doors a remote caller can push (issue #14): what the API token admits, over a real
app and database (SQLite and Postgres)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from service.api.app import create_app
from service.config import Settings
from service.db import session_scope
from service.models import Run, RunState, TestResult
from tests.support.factories import make_backend, make_finished_run
from tests.support.helpers import RecordingDispatcher

TOKEN = "t0ken-for-door-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def dispatcher() -> RecordingDispatcher:
    return RecordingDispatcher()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path, api_token=TOKEN, pins=["pip:torch==2.13.0"],
                    pip_index_url="https://pypi.example.org/simple")


@pytest.fixture
def client(
    engine: Engine, settings: Settings, dispatcher: RecordingDispatcher
) -> Iterator[TestClient]:
    with session_scope(engine) as s:
        make_backend(s, "acme")
    with TestClient(create_app(settings, dispatcher=dispatcher, engine=engine)) as c:
        yield c


def run_count(engine: Engine) -> int:
    with Session(engine) as s:
        return s.scalar(select(func.count()).select_from(Run)) or 0


@pytest.mark.parametrize(
    "torch",
    [
        "path:/tmp/evil-torch",
        "wheel:https://evil.example/torch-9.9-py3-none-any.whl",
        "pip:torch==2.14.1@@https://evil.example/simple",
        "pip:torch @ https://evil.example/torch-9.9-py3-none-any.whl",
    ],
)
def test_api_refuses_cli_only_specs_with_422_and_makes_no_run(
    client: TestClient, engine: Engine, dispatcher: RecordingDispatcher, torch: str
) -> None:
    resp = client.post("/api/runs", json={"backend": "acme", "torch": torch}, headers=AUTH)
    assert resp.status_code == 422, resp.text
    assert "CLI-only" in resp.json()["detail"]
    assert run_count(engine) == 0 and dispatcher.enqueued == []


@pytest.mark.parametrize("torch", ["pip:torch==2.13.0", "nightly", "pip:torch==2.14.1"])
def test_api_accepts_pins_tracks_and_exact_versions_on_the_configured_index(
    client: TestClient, dispatcher: RecordingDispatcher, torch: str
) -> None:
    resp = client.post("/api/runs", json={"backend": "acme", "torch": torch}, headers=AUTH)
    assert resp.status_code == 202, resp.text
    assert dispatcher.enqueued == [resp.json()["run_id"]]


def test_operator_setting_lets_the_api_run_any_spec(
    engine: Engine, settings: Settings, dispatcher: RecordingDispatcher
) -> None:
    with session_scope(engine) as s:
        make_backend(s, "acme")
    permissive = settings.model_copy(update={"api_allow_any_torch_spec": True})
    with TestClient(create_app(permissive, dispatcher=dispatcher, engine=engine)) as c:
        body = {"backend": "acme", "torch": "path:/srv/torch-overlay"}
        assert c.post("/api/runs", json=body, headers=AUTH).status_code == 202


def test_api_rerun_of_a_cli_path_run_is_refused(
    client: TestClient, engine: Engine, dispatcher: RecordingDispatcher
) -> None:
    """A CLI user's path: run failed; the token holder may not have the worker repeat it."""
    with session_scope(engine) as s:
        backend = make_backend(s, "other")
        run = make_finished_run(s, backend, spec="path:/home/dev/torch", build_log=b"boom\n")
        run.state = RunState.FAILED
        s.add(TestResult(run_id=run.id, nodeid="t.py::x", suite="t", outcome="failed"))
        run_id = run.id
    before = run_count(engine)
    resp = client.post(f"/api/runs/{run_id}/rerun", headers=AUTH)
    assert resp.status_code == 422 and "CLI-only" in resp.json()["detail"]
    assert run_count(engine) == before and dispatcher.enqueued == []
