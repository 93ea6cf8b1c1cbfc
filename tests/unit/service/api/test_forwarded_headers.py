"""X-Forwarded-* are believed only from OOTCI_FORWARDED_ALLOW_IPS in every way the API is
started: the deployment files never trust everyone, and the API image's own command,
started as a real process, ignores a forged X-Forwarded-Proto from a peer not listed."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.db import make_engine
from service.migrate import upgrade
from tests.support import redis_dbs
from tests.support.live_server import free_port
from tests.support.paths import REPO_ROOT
from tests.support.processes import Processes

# uvicorn's own flag and variable, and ours, set to "everyone".
_TRUST_ALL = re.compile(
    r"""forwarded[-_]allow[-_]ips["'\s,:=\[]*["']?\*""", re.IGNORECASE
)
_UVICORN_ENV = re.compile(r"(?<![A-Z_])FORWARDED_ALLOW_IPS\b")  # uvicorn's, not OOTCI_'s


def _deployment_files() -> list[Path]:
    files = [p for p in (REPO_ROOT / "docker").rglob("*") if p.is_file()]
    files += [p for p in (REPO_ROOT / "deploy").rglob("*") if p.is_file()]
    return sorted(files)


def test_no_deployment_file_trusts_forwarded_headers_from_everyone() -> None:
    files = _deployment_files()
    assert any(p.name == "Dockerfile.api" for p in files) and any(
        p.name == "compose.yaml" for p in files)
    offending = [
        f"{p.relative_to(REPO_ROOT)}:{n}: {line.strip()}"
        for p in files
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if _TRUST_ALL.search(line) or _UVICORN_ENV.search(line)
        or ("uvicorn" in line and "--proxy-headers" in line)
    ]
    assert offending == []


@pytest.mark.parametrize("line", [
    'CMD ["uvicorn", "x:app", "--proxy-headers", "--forwarded-allow-ips", "*"]',
    "    command: uvicorn x:app --forwarded-allow-ips='*'",
    "OOTCI_FORWARDED_ALLOW_IPS=[\"*\"]",
    "      - FORWARDED_ALLOW_IPS=10.0.0.1",
])
def test_the_check_catches_each_way_of_trusting_everyone(line: str) -> None:
    assert _TRUST_ALL.search(line) or _UVICORN_ENV.search(line)


def _image_command(port: int) -> list[str]:
    """Dockerfile.api's CMD, run from this checkout on a loopback port."""
    text = (REPO_ROOT / "docker" / "Dockerfile.api").read_text()
    match = re.search(r"^CMD\s+(\[.*?\])\s*$", text.replace("\\\n", " "), re.MULTILINE | re.DOTALL)
    assert match, "Dockerfile.api has no exec-form CMD"
    argv: list[str] = json.loads(match.group(1))
    assert argv[0] == "python"
    argv = [sys.executable, *argv[1:]]
    argv[argv.index("--host") + 1] = "127.0.0.1"
    argv[argv.index("--port") + 1] = str(port)
    return argv


@pytest.fixture
def started(tmp_path: Path) -> Iterator[tuple[Processes, str, dict[str, str]]]:
    db = tmp_path / "ootci.db"
    engine = make_engine(f"sqlite:///{db}")
    upgrade(engine)
    engine.dispose()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    env.update({"OOTCI_HOME": str(tmp_path), "OOTCI_DATABASE_URL": f"sqlite:///{db}",
                "OOTCI_BROKER_URL": redis_dbs.url(redis_dbs.FORWARDED_HEADERS)})
    processes = Processes(tmp_path / "logs")
    try:
        yield processes, str(tmp_path), env
    finally:
        processes.stop()


@pytest.mark.parametrize("proxies", [None, '["127.0.0.1"]'], ids=["unset", "loopback-listed"])
def test_the_api_images_command_ignores_forged_forwarded_headers(
    started: tuple[Processes, str, dict[str, str]], proxies: str | None
) -> None:
    processes, _, env = started
    if proxies is not None:
        env["OOTCI_FORWARDED_ALLOW_IPS"] = proxies
    port = free_port()
    processes.start("api", _image_command(port), env)
    url = f"http://127.0.0.1:{port}"
    processes.wait_healthy("api", url + "/healthz", 60)
    page = httpx.get(url + "/", headers={"X-Forwarded-Proto": "https",
                                          "X-Forwarded-For": "203.0.113.9"}, timeout=10)
    assert page.status_code == 200, processes.tail()
    assert ("https://127.0.0.1" in page.text) == (proxies is not None)
