"""The production shape end to end: uvicorn serving the API, a Redis-backed Celery worker
process, Postgres. A signed GitHub webhook queues a run that a real worker executes; a
worker SIGKILLed mid-run leaves the run re-claimable and the next worker finishes it once.

The backend is a trivial Python tree (its "build" prints, its suite is three pytest tests,
one of which waits for a file so the test controls how long the run stays "running"): this
tests distribution, not compilation.
"""

from __future__ import annotations

import datetime as dt
import http.server
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.commands.runs import create_run, get_or_create_backend
from service.db import make_engine, session_scope
from service.dispatch import CeleryDispatcher
from service.migrate import upgrade
from service.models import Run, RunState, TestResult
from tests.support import redis_dbs
from tests.support.fake_torch import build_wheel
from tests.support.file_server import LOOPBACK_WHEELS_ENV, serve_directory
from tests.support.gates import gate_fixture  # noqa: F401 (the `gate` fixture)
from tests.support.live_server import free_port
from tests.support.processes import Processes, celery_worker, uvicorn_api
from tests.support.pyonly import write_pyonly_backend
from tests.support.waiting import empty_broker, wait_until
from tests.support.webhooks import FIXTURES, sign

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

REDIS_URL = redis_dbs.url(redis_dbs.WORKER_DISTRIBUTION)
SECRET = "integration-secret"
TOKEN = "integration-token"
LEASE_S = 60  # the smallest lease settings accept: the kill test waits this long once


SUITE = """\
import os
import pathlib
import time

# Outside the backend's tree: each run builds and tests its own copy of that tree.
GATE = pathlib.Path("@GATE@")


def test_first():
    assert 1 + 1 == 2


def test_waits_for_the_gate():
    # The integration test opens the gate (creates the file) when it has seen what it wants.
    deadline = time.monotonic() + 240
    while not GATE.exists():
        assert time.monotonic() < deadline, "gate never opened"
        time.sleep(0.1)
    # Its own HOME: the sandbox keeps the backend's tree read-only to its tests.
    pathlib.Path(os.environ["HOME"], "gate.passed").write_text(str(os.getpid()))


def test_last():
    assert "ootci"
"""


@dataclass
class Stack:
    api: str
    env: dict[str, str]
    db_url: str
    backend_dir: Path
    gate: Path
    processes: Processes

    def start_worker(self, name: str) -> subprocess.Popen[bytes]:
        # Its own process group: SIGKILL takes the pool child too.
        return self.processes.start(name, celery_worker(name), self.env, log=f"worker-{name}")

    def trigger(self, torch: str) -> int:
        """Queue a run of the backend through the API, as a client would."""
        resp = httpx.post(
            f"{self.api}/api/runs",
            json={"backend": "pyonly", "torch": torch},
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=10,
        )
        assert resp.status_code == 202, resp.text
        return int(resp.json()["run_id"])

    def run(self, run_id: int) -> dict[str, Any]:
        resp = httpx.get(f"{self.api}/api/runs/{run_id}", timeout=10)
        resp.raise_for_status()
        return dict(resp.json())

    def post_webhook(self, body: bytes, event: str) -> httpx.Response:
        return httpx.post(
            f"{self.api}/webhooks/github",
            content=body,
            headers={
                "Content-Type": "application/json",
                "X-GitHub-Event": event,
                "X-GitHub-Delivery": str(uuid.uuid4()),
                "X-Hub-Signature-256": sign(body, SECRET),
                "User-Agent": "GitHub-Hookshot/integration",
            },
            timeout=10,
        )

    def tail(self) -> str:
        return self.processes.tail(3000)


@pytest.fixture
def stack(fresh_postgres_url: str, tmp_path: Path, gate: Path) -> Iterator[Stack]:
    broker = empty_broker(REDIS_URL)

    engine = make_engine(fresh_postgres_url)
    upgrade(engine)
    backend_dir = write_pyonly_backend(
        tmp_path / "pyonly", {"test_suite.py": SUITE.replace("@GATE@", str(gate))}
    )
    with session_scope(engine) as s:
        get_or_create_backend(s, "pyonly", str(backend_dir))
    engine.dispose()

    env = {
        **os.environ,
        "OOTCI_HOME": str(tmp_path / "home"),
        "OOTCI_DATABASE_URL": fresh_postgres_url,
        "OOTCI_BROKER_URL": REDIS_URL,
        "OOTCI_WEBHOOK_SECRET": SECRET,
        "OOTCI_API_TOKEN": TOKEN,
        "OOTCI_DEFAULT_TORCH": "installed",
        "OOTCI_RELAY_REPOSITORIES": '["acme/torch-acme"]',
        "OOTCI_RUN_LEASE_S": str(LEASE_S),
        "OOTCI_RERUN_FAILED_TESTS": "false",
        "PYTHONUNBUFFERED": "1",
        **LOOPBACK_WHEELS_ENV,
    }
    port = free_port()
    processes = Processes(tmp_path / "logs")
    st = Stack(f"http://127.0.0.1:{port}", env, fresh_postgres_url, backend_dir, gate, processes)
    try:
        processes.start("api", uvicorn_api(port), env)
        processes.wait_healthy("api", f"{st.api}/healthz", 30)
        yield st
    finally:
        processes.stop()
        broker.flushdb()
        broker.close()


def test_signed_webhook_run_goes_queued_running_finished_through_a_worker(
    stack: Stack, tmp_path: Path
) -> None:
    # A relayed PR event with the PR's own build (a PR run tests that build or none).
    wheel = build_wheel(tmp_path / "pr-builds", "2.14.0", "e" * 40, {})
    relayed = json.loads((FIXTURES / "repository_dispatch_pull_request.json").read_bytes())
    with serve_directory(wheel.parent) as url:
        relayed["client_payload"]["wheel_url"] = f"{url}/{wheel.name}"
        _webhook_run_through_a_worker(stack, json.dumps(relayed).encode())


def _webhook_run_through_a_worker(stack: Stack, body: bytes) -> None:
    resp = stack.post_webhook(body, "repository_dispatch")
    assert resp.status_code == 202, resp.text
    assert resp.json()["status"] == "queued"
    (run_id,) = resp.json()["run_ids"]
    assert stack.run(run_id)["state"] == "queued"  # no worker yet: it waits in Redis

    stack.start_worker("w1")
    states = []

    def test_step_running() -> bool:
        run = stack.run(run_id)
        states.append(run["state"])
        return any(s["name"] == "test" and s["status"] == "running" for s in run["steps"])

    wait_until(test_step_running, 120, lambda: f"run {run_id} to reach its test step\n{stack.tail()}")
    running = stack.run(run_id)
    assert running["state"] == "running"
    assert running["claimed_by"]
    live = httpx.get(
        f"{stack.api}/api/runs/{run_id}/steps/test/log", params={"tail": 50}, timeout=10
    )
    assert live.headers["x-log-complete"] == "false"

    stack.gate.touch()
    final = wait_until(
        lambda: (r := stack.run(run_id))["state"] not in ("queued", "running") and r,
        120,
        lambda: f"run {run_id} to finish\n{stack.tail()}",
    )
    assert final["state"] == "passed", final
    assert final["trigger"] == "webhook" and final["trigger_info"]["pr"] == 165432
    assert [s["name"] for s in final["steps"]] == ["provision", "build", "test", "collect"]
    tests = httpx.get(f"{stack.api}/api/runs/{run_id}/tests", timeout=10).json()
    assert tests["total"] == 3
    assert {r["outcome"] for r in tests["results"]} == {"passed"}
    assert states[0] in ("queued", "running")
    log = httpx.get(f"{stack.api}/api/runs/{run_id}/steps/build/log", timeout=10)
    assert b"nothing to compile" in log.content


def test_worker_killed_mid_run_leaves_exactly_one_finished_run(stack: Stack) -> None:
    run_id = stack.trigger("installed")
    first = stack.start_worker("doomed")

    def in_test_step() -> bool:
        return any(
            s["name"] == "test" and s["status"] == "running" for s in stack.run(run_id)["steps"]
        )

    wait_until(in_test_step, 120, lambda: f"run {run_id} to reach its test step\n{stack.tail()}")
    owner = stack.run(run_id)["claimed_by"]
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(10)
    killed_at = time.monotonic()
    assert stack.run(run_id)["state"] == "running"  # the dead worker's lease still holds it

    stack.gate.touch()  # the next attempt will not wait
    stack.start_worker("rescuer")
    final = wait_until(
        lambda: (r := stack.run(run_id))["state"] not in ("queued", "running") and r,
        LEASE_S + 120,
        lambda: f"run {run_id} to be re-claimed and finished\n{stack.tail()}",
        every=1.0,
    )
    # Not before the lease ran out: nobody may take a run a live lease protects.
    assert time.monotonic() - killed_at >= LEASE_S - 5
    assert final["state"] == "passed", final
    assert final["attempts"] == 2
    assert final["claimed_by"] is None
    assert owner
    engine = make_engine(stack.db_url)
    with Session(engine) as s:
        assert s.scalar(select(func.count(Run.id))) == 1
        # The first attempt's partial results were replaced, not duplicated.
        assert s.scalar(select(func.count(TestResult.id)).where(TestResult.run_id == run_id)) == 3
    engine.dispose()
    # A third delivery of the same task (say, a late redelivery) is a no-op.
    steps_before = [s["id"] for s in final["steps"]]
    time.sleep(2)
    assert [s["id"] for s in stack.run(run_id)["steps"]] == steps_before


class _DownIndex(http.server.BaseHTTPRequestHandler):
    """A package index that is down: every request gets 503, and its time is noted."""

    hits: list[float] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        type(self).hits.append(time.monotonic())
        self.send_response(503, "Service Unavailable")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


def test_an_infra_failure_is_retried_with_backoff_then_ends_errored(stack: Stack) -> None:
    _DownIndex.hits = []
    index = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _DownIndex)
    threading.Thread(target=index.serve_forever, daemon=True).start()
    try:
        stack.env.update({
            "OOTCI_NIGHTLY_INDEX_URL": f"http://127.0.0.1:{index.server_address[1]}/simple",
            "OOTCI_INFRA_RETRIES": "2",
            "OOTCI_INFRA_RETRY_DELAY_S": "2",
        })
        run_id = stack.trigger("nightly")
        stack.start_worker("w1")

        waiting = wait_until(
            lambda: (r := stack.run(run_id))["retry_at"] and r["state"] == "queued" and r,
            60, lambda: f"run {run_id} to be requeued after its first attempt\n{stack.tail()}",
            every=0.1,
        )
        assert waiting["attempts"] == 1
        assert waiting["error"].startswith("infra error on attempt 1 of 3, retrying in 2 s:")
        assert "package index unreachable" in waiting["error"] or "HTTP 503" in waiting["error"]
        final = wait_until(
            lambda: (r := stack.run(run_id))["state"] not in ("queued", "running") and r,
            90, lambda: f"run {run_id} to use up its retries\n{stack.tail()}",
        )
    finally:
        index.shutdown()
    assert final["state"] == "errored" and final["verdict"] == "infra", final
    assert final["attempts"] == 3 and final["retry_at"] is None
    assert final["error"].startswith("infra error on the last of 3 attempts:")
    # One index request per attempt, each after its backoff (2 s, then 4 s).
    hits = _DownIndex.hits
    assert len(hits) == 3, hits
    assert hits[1] - hits[0] >= 2 and hits[2] - hits[1] >= 4
    # Only the last attempt's steps remain: each attempt starts over.
    assert [s["name"] for s in final["steps"]] == ["provision"]


def test_a_message_for_a_run_under_a_dead_workers_lease_waits_for_the_lease(
    stack: Stack,
) -> None:
    # What a redelivered message meets when the dead worker renewed its lease after
    # the message was delivered: the broker's visibility timeout runs out first.
    engine = make_engine(stack.db_url)
    lease_ends = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=8)
    with session_scope(engine) as s:
        backend = get_or_create_backend(s, "pyonly", str(stack.backend_dir))
        run = create_run(s, backend, "installed", trigger="api")
        run.state, run.attempts = RunState.RUNNING, 1
        run.claimed_by, run.lease_expires_at = "ghost:1", lease_ends
        run_id = run.id
    engine.dispose()
    stack.gate.touch()
    stack.start_worker("w1")
    dispatcher = CeleryDispatcher(REDIS_URL)
    try:
        dispatcher.enqueue_run(run_id)
    finally:
        dispatcher.close()
    final = wait_until(
        lambda: (r := stack.run(run_id))["state"] not in ("queued", "running") and r,
        90, lambda: f"run {run_id} to be claimed once the lease ran out\n{stack.tail()}",
    )
    assert final["state"] == "passed", final
    assert final["attempts"] == 2
    assert dt.datetime.fromisoformat(final["started_at"]) >= lease_ends
