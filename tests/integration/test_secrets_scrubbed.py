"""Every long-lived ootci process reads its secrets at start and leaves none in
``/proc/<pid>/environ``: the kernel shows the initial environment block there, which
``os.environ`` edits do not change (``service/secrets.py``).

Real processes, started the way deployments start them, with the deployment's secrets in
their environment (one by ``*_FILE``); another process reads each one's
``/proc/<pid>/environ`` (the pool child's too). The readers here run as root, which
reads any process: the point is that nothing is left to read. That a process of the same
uid without privileges cannot read it at all (non-dumpable) is checked in a real process
by asking the kernel (``PR_GET_DUMPABLE``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import redis_dbs
from tests.support.live_server import free_port
from tests.support.paths import REPO_ROOT
from tests.support.processes import Processes, celery_worker, uvicorn_api
from tests.support.waiting import empty_broker, wait_until

REDIS_URL = redis_dbs.url(redis_dbs.SECRETS_SCRUBBED)
API_TOKEN_IN_FILE = "api-token-from-file-5c1e"
SECRETS = {
    "OOTCI_API_TOKEN": "api-token-in-env-7e2a",  # the *_FILE beats it
    "OOTCI_WEBHOOK_SECRET": "webhook-secret-scrub-0b9d",
    "OOTCI_GITHUB_TOKEN": "ghp_scrubTestToken0123456789",
}
DB_PASSWORD = "Db-Scrub-Pa55-k3"
NEEDLES = [*SECRETS.values(), DB_PASSWORD, API_TOKEN_IN_FILE]


@pytest.fixture
def deployment_env(tmp_path: Path, fresh_postgres_url: str) -> Iterator[dict[str, str]]:
    token_file = tmp_path / "api-token"
    token_file.write_text(API_TOKEN_IN_FILE + "\n")
    broker = empty_broker(REDIS_URL)
    yield {
        **{k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")},
        **SECRETS,
        # Postgres trusts loopback: the password is carried, never checked.
        "OOTCI_DATABASE_URL": fresh_postgres_url.replace("postgres@", f"postgres:{DB_PASSWORD}@", 1),
        "OOTCI_API_TOKEN_FILE": str(token_file),
        "OOTCI_HOME": str(tmp_path / "home"),
        "OOTCI_BROKER_URL": REDIS_URL,
        "PYTHONUNBUFFERED": "1",
    }
    broker.flushdb()


def _environ(pid: int) -> str:
    return Path(f"/proc/{pid}/environ").read_bytes().replace(b"\0", b"\n").decode()


def _assert_clean(pid: int, what: str) -> None:
    environ = _environ(pid)
    # The process is the one we meant: its environment block is still there.
    assert "OOTCI_HOME=" in environ, (what, environ)
    for needle in NEEDLES:
        assert needle not in environ, (what, needle)
    # The file's path is no secret: it stays for an exec'd ootci child to read again.
    assert "OOTCI_API_TOKEN_FILE=" in environ


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_cli_server_and_uvicorn_api_hold_no_secret_in_their_environ(
    deployment_env: dict[str, str], tmp_path: Path
) -> None:
    processes = Processes(tmp_path / "logs")
    cli_port, api_port = free_port(), free_port()
    try:
        cli = processes.start("ootci-serve", [sys.executable, "-m", "service.cli", "serve",
                                              "--port", str(cli_port)], deployment_env)
        api = processes.start("uvicorn", uvicorn_api(api_port), deployment_env)
        processes.wait_healthy("ootci-serve", f"http://127.0.0.1:{cli_port}/healthz", 60)
        processes.wait_healthy("uvicorn", f"http://127.0.0.1:{api_port}/healthz", 60)
        _assert_clean(cli.pid, "ootci serve")
        _assert_clean(api.pid, "uvicorn app_factory")
        # Both serve with the secrets they read: the file's token is the one that counts.
        for port in (cli_port, api_port):
            url = f"http://127.0.0.1:{port}/api/runs"
            env_token = httpx.post(url, json={}, headers={
                "Authorization": f"Bearer {SECRETS['OOTCI_API_TOKEN']}"})
            file_token = httpx.post(url, json={}, headers={
                "Authorization": f"Bearer {API_TOKEN_IN_FILE}"})
            assert env_token.status_code == 401, env_token.text
            assert file_token.status_code == 422, file_token.text
    finally:
        processes.stop()


def test_celery_worker_pool_child_and_beat_hold_no_secret_in_their_environ(
    deployment_env: dict[str, str], tmp_path: Path
) -> None:
    processes = Processes(tmp_path / "logs")
    try:
        worker = processes.start("worker", celery_worker("scrub"), deployment_env)
        beat = processes.start("beat", [
            sys.executable, "-m", "celery", "-A", "workers.celery_app", "beat",
            f"--schedule={tmp_path / 'celerybeat-schedule'}", "--loglevel=INFO",
        ], deployment_env)

        def pool_child() -> int | None:
            assert worker.poll() is None, processes.tail()
            ready = "ready." in (tmp_path / "logs" / "worker.log").read_text()
            children = _children(worker.pid)
            return children[0] if ready and children else None

        child = wait_until(pool_child, 90, lambda: f"the worker's pool\n{processes.tail()}")
        wait_until(lambda: "beat: Starting" in (tmp_path / "logs" / "beat.log").read_text(),
                   60, lambda: f"beat to start\n{processes.tail()}")
        _assert_clean(worker.pid, "celery worker main process")
        _assert_clean(child, "celery pool child")
        _assert_clean(beat.pid, "celery beat")
    finally:
        processes.stop()


PROBE = """
import ctypes, os
from service.secrets import load_and_scrub
from service.config import get_settings
load_and_scrub()
settings = get_settings()
print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))  # PR_GET_DUMPABLE
print(settings.api_token.get_secret_value(), settings.database_url)
print(sorted(k for k in os.environ if "TOKEN" in k or "DATABASE" in k))
"""


def test_a_scrubbed_process_is_non_dumpable_and_keeps_its_settings(
    deployment_env: dict[str, str],
) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO_ROOT, env=deployment_env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    dumpable, held, names = done.stdout.splitlines()
    assert dumpable == "0"
    assert held == f"{API_TOKEN_IN_FILE} {deployment_env['OOTCI_DATABASE_URL']}"
    assert names == "['OOTCI_API_TOKEN_FILE']"


@pytest.mark.parametrize("entry", ["cli", "uvicorn"])
def test_an_unreadable_secret_file_is_one_line_and_exit_2(
    entry: str, deployment_env: dict[str, str], tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-token"
    env = {**deployment_env, "OOTCI_GITHUB_TOKEN_FILE": str(missing)}
    argv = ([sys.executable, "-m", "service.cli", "runs"] if entry == "cli"
            else uvicorn_api(free_port()))
    done = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert lines == [f"error: OOTCI_GITHUB_TOKEN_FILE={missing}: cannot read it: "
                     "No such file or directory"], done.stderr
    assert not (tmp_path / "home").exists()  # nothing half-written
