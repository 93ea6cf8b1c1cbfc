"""The embedded default: no broker, the API hands runs to an in-process thread pool that
runs the real pipeline (the same ``execute_run`` the Celery task calls)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine

from service.api.app import create_app
from service.commands.runs import get_or_create_backend
from service.config import Settings
from service.db import make_engine, session_scope
from service.dispatch import InProcessDispatcher
from service.migrate import upgrade
from tests.support.fake_torch import build_wheel
from tests.support.file_server import LOOPBACK_WHEELS, serve_directory
from tests.support.pyonly import write_pyonly_backend
from tests.support.waiting import wait_until
from tests.support.webhooks import FIXTURES, sign
from workers.pipeline.execute import execute_run

SECRET = "in-process"



def test_webhook_run_executes_in_process_without_a_broker(tmp_path: Path) -> None:
    backend = write_pyonly_backend(
        tmp_path / "pyonly", {"test_ok.py": "def test_ok():\n    assert True\n"}
    )
    settings = Settings(
        home=tmp_path / "home",
        webhook_secret=SECRET,
        default_torch="installed",
        rerun_failed_tests=False,
        relay_repositories=["acme/torch-acme"],
        **LOOPBACK_WHEELS,
    )
    # The upstream PR's own build, published where the relay says (a PR run never borrows
    # another torch): a small stand-in wheel served over loopback HTTP.
    wheel = build_wheel(tmp_path / "pr-builds", "2.14.0", "e" * 40, {})
    assert settings.in_process
    engine = make_engine(settings.resolved_database_url)
    upgrade(engine)
    with session_scope(engine) as s:
        get_or_create_backend(s, "pyonly", str(backend))
    dispatcher = InProcessDispatcher(
        lambda run_id: execute_run(engine, settings, run_id, "in-process-test")
    )
    relayed = json.loads((FIXTURES / "repository_dispatch_pull_request.json").read_bytes())
    with serve_directory(wheel.parent) as url:
        relayed["client_payload"]["wheel_url"] = f"{url}/{wheel.name}"
        _deliver_and_follow(settings, engine, dispatcher, json.dumps(relayed).encode())
    engine.dispose()


def _deliver_and_follow(
    settings: Settings, engine: Engine, dispatcher: InProcessDispatcher, body: bytes
) -> None:
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "repository_dispatch",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(body, SECRET),
    }
    with TestClient(create_app(settings, dispatcher=dispatcher, engine=engine)) as client:
        resp = client.post("/webhooks/github", content=body, headers=headers)
        assert resp.status_code == 202, resp.text
        (run_id,) = resp.json()["run_ids"]

        def finished() -> dict[str, Any] | None:
            run = client.get(f"/api/runs/{run_id}").json()
            return None if run["state"] in ("queued", "running") else dict(run)

        run = wait_until(finished, 120, lambda: f"run {run_id} to finish: "
                         f"{client.get(f'/api/runs/{run_id}').json()}")
        assert run["state"] == "passed", run
        assert run["claimed_by"] is None and run["attempts"] == 1
        tests = client.get(f"/api/runs/{run_id}/tests").json()
        assert [r["nodeid"] for r in tests["results"]] == ["tests/test_ok.py::test_ok"]
        assert run["torch_build"]["git_version"] == "e" * 40
