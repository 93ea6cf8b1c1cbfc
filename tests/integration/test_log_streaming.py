"""A running step's log read from another machine: the worker streams it to the database in
chunks, and an API process with a work dir of its own (it cannot read the worker's files)
pages and follows it while it grows; once the step ends the stored log is served as before.

The backend's test step prints a numbered line every few tenths of a second until the test
opens its gate, so the run stays "running" for as long as the test watches it.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from service.commands.runs import create_run, get_or_create_backend
from service.config import Settings
from service.db import session_scope
from service.models import LogChunk, Step
from tests.support import redis_dbs
from tests.support.gates import gate_fixture  # noqa: F401 (the `gate` fixture)
from tests.support.live_server import free_port
from tests.support.processes import Processes, uvicorn_api
from tests.support.waiting import wait_until
from workers.pipeline.execute import execute_run

pytestmark = pytest.mark.slow

RECIPE = """\
[backend]
name = "ticker"

[build]
command = ["{python}", "-c", "print('nothing to compile')"]

[test]
command = ["{python}", "-m", "pytest", "tests", "-s", "-p", "no:cacheprovider", "--junitxml={junit}"]
timeout_per_test = 300
"""

SUITE = """\
import pathlib
import time

# Outside the tree and the host's /tmp (tests/support/gates.py): the sandbox sees it.
GATE = pathlib.Path("@GATE@")


def test_ticks_until_the_gate_opens():
    deadline = time.monotonic() + 240
    tick = 0
    while not GATE.exists():
        assert time.monotonic() < deadline, "gate never opened"
        tick += 1
        print(f"tick {tick} token=s3cr3t-streamed", flush=True)
        time.sleep(0.2)
    print("gate seen", flush=True)
"""

SECRET = "s3cr3t-streamed"


@pytest.fixture
def api(engine: Engine, tmp_path: Path) -> Iterator[str]:
    """The API as production serves it (uvicorn, the app factory), in its own process with
    its own home: the worker's work dir is not its."""
    port = free_port()
    env = {
        "PATH": os.environ["PATH"],
        "OOTCI_HOME": str(tmp_path / "api-home"),
        "OOTCI_DATABASE_URL": str(engine.url.render_as_string(hide_password=False)),
        # Production's API dispatches through a broker; nothing is dispatched here.
        "OOTCI_BROKER_URL": redis_dbs.url(redis_dbs.LOG_STREAMING),
    }
    processes = Processes(tmp_path / "api-logs")
    url = f"http://127.0.0.1:{port}"
    try:
        processes.start("api", uvicorn_api(port), env)
        processes.wait_healthy("api", url + "/healthz", 60)
        yield url
    finally:
        processes.stop()


def _ticks(text: str) -> list[int]:
    # pytest -s prints the first one after the file's name, on the same line.
    return [int(n) for n in re.findall(r"\btick (\d+) ", text)]


def test_a_running_log_is_followed_from_another_process(
    engine: Engine, tmp_path: Path, api: str, gate: Path
) -> None:
    backend = tmp_path / "ticker"
    (backend / "tests").mkdir(parents=True)
    (backend / "ootci.toml").write_text(RECIPE)
    (backend / "tests" / "test_ticks.py").write_text(SUITE.replace("@GATE@", str(gate)))
    settings = Settings(
        home=tmp_path / "worker-home", database_url=str(engine.url.render_as_string(False)),
        default_torch="installed", rerun_failed_tests=False,
        api_token=SECRET,  # a secret of the worker's: masked in every log line
    )
    with session_scope(engine) as s:
        run_id = create_run(
            s, get_or_create_backend(s, "ticker", str(backend)), "installed", trigger="api"
        ).id
    states: list[str | None] = []
    worker = threading.Thread(
        target=lambda: states.append(execute_run(engine, settings, run_id, "worker-a"))
    )
    worker.start()
    url = f"{api}/api/runs/{run_id}/steps/test/log"
    try:
        seen: list[list[int]] = []
        offset = 0
        followed = b""

        def three_growing_reads() -> bool:
            nonlocal offset, followed
            assert worker.is_alive(), states
            resp = httpx.get(url, params={"offset": offset}, timeout=10)
            if resp.status_code == 200 and resp.content:
                assert resp.headers["x-log-complete"] == "false"
                assert int(resp.headers["x-log-offset"]) == offset
                offset += len(resp.content)
                followed += resp.content
                ticks = _ticks(followed.decode())
                if ticks and (not seen or ticks[-1] > seen[-1][-1]):
                    seen.append(ticks)
            return len(seen) >= 3 and len(seen[-1]) >= 5

        wait_until(three_growing_reads, 180, lambda: f"the log to grow three times: {seen}",
                   every=0.5)
        # Lines arrived in order, while the step ran, and masked.
        assert seen[-1] == list(range(1, seen[-1][-1] + 1))
        assert SECRET not in followed.decode() and "token=***" in followed.decode()
        tail = httpx.get(url, params={"tail": 1}, timeout=10)
        assert tail.headers["x-log-complete"] == "false" and b"tick " in tail.content
        page = httpx.get(f"{api}/runs/{run_id}/steps/test/log", timeout=10).text
        assert "data-follow-url" in page and "tick 1 " in page
        with Session(engine) as s:
            step = s.scalars(select(Step).where(Step.run_id == run_id, Step.name == "test")).one()
            assert step.log_path is not None and not step.log_path.startswith(str(tmp_path / "api-home"))
            assert s.scalar(select(func.count()).select_from(LogChunk)) > 0
    finally:
        gate.touch()
        worker.join(120)
    assert states == ["passed"], states

    # The step ended: the stored log is served, whole, and the chunks are gone.
    done = httpx.get(url, timeout=10)
    assert done.headers["x-log-complete"] == "true"
    assert done.content.startswith(followed) and b"gate seen" in done.content
    assert SECRET.encode() not in done.content
    with Session(engine) as s:
        assert s.scalar(select(func.count()).select_from(LogChunk)) == 0
