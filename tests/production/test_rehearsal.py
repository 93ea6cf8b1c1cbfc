"""A production rehearsal: the shape of a deployment, as separate processes on this machine.

The API under uvicorn, two Celery workers with their own homes (their own caches, work dirs
and git mirrors: two machines share only Postgres and Redis), a fresh Postgres database
migrated first, Redis db 10 as the broker. A backend is registered through the API from a
git repository (a local bare one: file:// stands in for GitHub); a commit is pushed and
GitHub's signed ``push`` webhook delivered. One worker builds the run at the pushed sha and
is killed with SIGKILL mid-build (the API, sharing no disk with it, following the build's
log live); the other takes the run over once its lease runs out and
finishes it; the dashboard's page of the run shows the verdict.

Run with ``-s`` to see the timeline: seconds from the push to each event.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.db import make_engine
from service.migrate import upgrade
from tests.support import redis_dbs
from tests.support.gates import gate_fixture  # noqa: F401 (the `gate` fixture)
from tests.support.git_repos import Remote, make_remote, push_payload
from tests.support.live_server import free_port
from tests.support.processes import Processes, celery_worker, uvicorn_api
from tests.support.pyonly import write_pyonly_backend
from tests.support.waiting import empty_broker, wait_until
from tests.support.webhooks import sign

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

REDIS_URL = redis_dbs.url(redis_dbs.REHEARSAL)
SECRET = "rehearsal-webhook-secret"
TOKEN = "rehearsal-api-token"
LEASE_S = 60  # the smallest lease settings accept: the take-over waits for it once

# The build waits for a gate outside the backend's tree (and the host's /tmp, which a
# sealed build does not see: tests/support/gates.py), printing as a compiler would, so
# the run stays in its build step until the rehearsal has followed its log and killed the
# worker running it.
BUILD = """\
import pathlib
import time

gate = pathlib.Path("@GATE@")
deadline = time.monotonic() + 300
while not gate.exists():
    assert time.monotonic() < deadline, "gate never opened"
    print("compiling openreg kernels ...", flush=True)
    time.sleep(0.1)
print("built", flush=True)
"""

SUITE = """\
def test_device_count():
    assert 1 + 1 == 2
"""


@dataclass
class Timeline:
    start: float = field(default_factory=time.monotonic)
    events: list[tuple[float, str]] = field(default_factory=list)

    def mark(self, what: str) -> None:
        self.events.append((time.monotonic() - self.start, what))

    def render(self) -> str:
        return "\n".join(f"  {t:7.1f} s  {what}" for t, what in self.events)


@dataclass
class Deployment:
    api: str
    base_env: dict[str, str]
    root: Path
    processes: Processes

    @property
    def logs(self) -> Path:
        return self.processes.logs

    @property
    def procs(self) -> dict[str, subprocess.Popen[bytes]]:
        return self.processes.procs

    def env_for(self, machine: str) -> dict[str, str]:
        """One machine's environment: its own OOTCI_HOME (cache, work dir, git mirrors)."""
        return {**self.base_env, "OOTCI_HOME": str(self.root / machine)}

    def start(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        # Its own process group: SIGKILL takes its pool too.
        return self.processes.start(name, argv, self.env_for(name))

    def start_worker(self, name: str) -> subprocess.Popen[bytes]:
        return self.start(name, celery_worker(name))

    def get(self, path: str, **params: Any) -> httpx.Response:
        return httpx.get(f"{self.api}{path}", params=params, timeout=10)

    def run(self, run_id: int) -> dict[str, Any]:
        resp = self.get(f"/api/runs/{run_id}")
        resp.raise_for_status()
        return dict(resp.json())

    def deliver(self, event: str, payload: dict[str, Any]) -> httpx.Response:
        body = json.dumps(payload).encode()
        return httpx.post(f"{self.api}/webhooks/github", content=body, timeout=30, headers={
            "Content-Type": "application/json", "X-GitHub-Event": event,
            "X-GitHub-Delivery": str(uuid.uuid4()), "X-Hub-Signature-256": sign(body, SECRET),
            "User-Agent": "GitHub-Hookshot/rehearsal",
        })

    def tail(self) -> str:
        return self.processes.tail()

    def worker_of(self, claimed_by: str) -> str:
        """Which worker's process group holds the pid a claim names (``host:pid``)."""
        pid = int(claimed_by.rsplit(":", 1)[1])
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        group = int(stat[2])
        return next(name for name, p in self.procs.items() if p.pid == group)


@pytest.fixture
def deployment(fresh_postgres_url: str, tmp_path: Path) -> Iterator[Deployment]:
    broker = empty_broker(REDIS_URL)
    # The migration job runs before anything serves.
    engine = make_engine(fresh_postgres_url)
    upgrade(engine)
    engine.dispose()

    base_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "OOTCI_DATABASE_URL": fresh_postgres_url,
        "OOTCI_BROKER_URL": REDIS_URL,
        "OOTCI_WEBHOOK_SECRET": SECRET,
        "OOTCI_API_TOKEN": TOKEN,
        "OOTCI_DEFAULT_TORCH": "installed",
        "OOTCI_PINS": '["installed"]',
        "OOTCI_NIGHTLY_INDEX_URL": "http://127.0.0.1:9/whl/nightly/cpu",
        "OOTCI_RUN_LEASE_S": str(LEASE_S),
        "OOTCI_RERUN_FAILED_TESTS": "false",
        "PYTHONUNBUFFERED": "1",
    }
    port = free_port()
    dep = Deployment(f"http://127.0.0.1:{port}", base_env, tmp_path, Processes(tmp_path / "logs"))
    try:
        dep.start("api", uvicorn_api(port))
        dep.processes.wait_healthy("api", f"{dep.api}/healthz", 60)
        yield dep
    finally:
        dep.processes.stop()
        broker.flushdb()
        broker.close()


@pytest.fixture
def remote(tmp_path: Path, gate: Path) -> Remote:
    r = make_remote(tmp_path / "vendor-repo")
    backend = write_pyonly_backend(r.work / "backend", {"test_suite.py": SUITE})
    (backend / "build.py").write_text(BUILD.replace("@GATE@", str(gate)))
    recipe = (backend / "ootci.toml").read_text()
    (backend / "ootci.toml").write_text(recipe.replace(
        """command = ["{python}", "-c", "print('nothing to compile')"]""",
        """command = ["{python}", "build.py"]"""))
    r.push("the backend's first commit")
    return r


def test_push_webhook_build_kill_take_over_verdict(
    deployment: Deployment, remote: Remote, tmp_path: Path, gate: Path
) -> None:
    dep = deployment
    registered = httpx.post(
        f"{dep.api}/api/backends", timeout=30, headers={"Authorization": f"Bearer {TOKEN}"},
        json={"name": "pyonly", "git": remote.url, "ref": "main", "subdir": "backend"},
    )
    assert registered.status_code == 201, registered.text
    workers = [dep.start_worker("machine-a"), dep.start_worker("machine-b")]
    time.sleep(3)  # both consuming before the push, as in a running deployment
    assert all(w.poll() is None for w in workers), dep.tail()

    timeline = Timeline()
    (remote.work / "backend" / "CHANGES").write_text("the commit under test\n")
    sha = remote.push("the commit under test")
    timeline.mark(f"pushed {sha[:12]} to the vendor's repository")
    answer = dep.deliver("push", push_payload(remote, sha))
    assert answer.status_code == 202 and answer.json()["status"] == "queued", answer.text
    # The nightly's targets: the pin (the rehearsal's torch) and the newest nightly, whose
    # index this machine cannot reach (that run ends errored-infra; the pin's is followed).
    queued = {dep.run(i)["torch_spec"]: i for i in answer.json()["run_ids"]}
    assert sorted(queued) == ["installed", "nightly"], queued
    run_id = queued["installed"]
    timeline.mark(f"push webhook accepted: runs {sorted(queued.values())} queued")

    first = wait_until(lambda: (r := dep.run(run_id))["state"] == "running" and r, 120,
                       lambda: f"run {run_id} to be claimed\n{dep.tail()}", every=0.1)
    owner = dep.worker_of(first["claimed_by"])
    timeline.mark(f"claimed by {owner} ({first['claimed_by']})")

    def in_step(name: str) -> Callable[[], bool]:
        return lambda: any(s["name"] == name and s["status"] == "running"
                           for s in dep.run(run_id)["steps"])

    wait_until(in_step("build"), 180, lambda: f"run {run_id} to start building\n{dep.tail()}",
               every=0.1)
    timeline.mark("build step running")
    assert dep.run(run_id)["backend_sha"] == sha
    # The API shares no disk with the workers (its own home): it follows the running build's
    # log from the chunks the worker streams into the database, and sees it grow.
    first_read = wait_until(
        lambda: "compiling" in (t := dep.get(f"/api/runs/{run_id}/steps/build/log").text) and t,
        60, lambda: f"run {run_id}'s running build log through the API\n{dep.tail()}",
        every=0.2,
    )
    grown = wait_until(
        lambda: len(t := dep.get(f"/api/runs/{run_id}/steps/build/log").text) > len(first_read)
        and t, 30, lambda: f"run {run_id}'s build log to grow\n{dep.tail()}", every=0.2,
    )
    assert in_step("build")(), "the log was read after the step, not while it ran"
    timeline.mark(f"API follows the running build log ({len(first_read)} -> {len(grown)} bytes)")

    os.killpg(dep.procs[owner].pid, signal.SIGKILL)
    dep.procs[owner].wait(10)
    timeline.mark(f"kill -9 {owner} mid-build")
    assert dep.run(run_id)["state"] == "running"  # the dead worker's lease still holds it
    gate.touch()  # the next attempt's build does not wait

    survivor = next(name for name in ("machine-a", "machine-b") if name != owner)
    taken = wait_until(lambda: (r := dep.run(run_id))["attempts"] == 2 and r, LEASE_S + 180,
                       lambda: f"run {run_id} to be taken over\n{dep.tail()}", every=0.5)
    if taken["claimed_by"]:
        assert dep.worker_of(taken["claimed_by"]) == survivor
    timeline.mark(f"taken over by {survivor} (attempt 2)")
    final = wait_until(
        lambda: (r := dep.run(run_id))["state"] not in ("queued", "running") and r, 180,
        lambda: f"run {run_id} to finish\n{dep.tail()}", every=0.2,
    )
    timeline.mark(f"finished: {final['state']} (verdict {final['verdict']})")
    assert (final["state"], final["verdict"]) == ("passed", "compatible"), final
    assert final["attempts"] == 2 and final["backend_sha"] == sha
    assert final["trigger"] == "webhook" and final["trigger_info"]["sha"] == sha
    assert [s["name"] for s in final["steps"]] == ["provision", "build", "test", "collect"]
    # The survivor's task returns (and logs) just after the run's last commit.
    wait_until(lambda: f"run {run_id}: passed" in (dep.logs / f"{survivor}.log").read_text(
        errors="replace"), 30, lambda: f"{survivor} to log the run's end\n{dep.tail()}")
    # Each machine fetched the commit into its own mirror: nothing was shared but the
    # database and the broker.
    for machine in ("machine-a", "machine-b"):
        assert list((tmp_path / machine / "cache" / "git").glob("*.git")), machine

    page = dep.get(f"/runs/{run_id}")
    assert page.status_code == 200
    # A passed run's verdict is compatible, on the page as in the API.
    assert 'data-state="passed"' in page.text and 'data-state="running"' not in page.text
    assert '<span class="badge v-compatible">compatible</span>' in page.text
    assert sha[:12] in page.text
    timeline.mark("dashboard page of the run shows the verdict")
    print(f"\nrehearsal timeline (run {run_id}, seconds from the push):\n{timeline.render()}")
