"""A live server for tests and benchmarks: real uvicorn on 127.0.0.1 (a free port); for the
browser tests also Chromium and where screenshots go (``artifacts/screenshots/``, which CI
keeps)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from sqlalchemy import Engine

from service.api.app import create_app
from service.config import Settings
from tests.support.helpers import RecordingDispatcher
from tests.support.paths import REPO_ROOT
from tests.support.waiting import wait_until

ROOT = REPO_ROOT
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@dataclass
class LiveServer:
    url: str
    engine: Engine


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def uvicorn_in_thread(config: uvicorn.Config) -> Iterator[str]:
    """Serve ``config`` from a thread of this process until the block ends; yields the URL."""
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()

    def started() -> bool:
        if not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        return bool(server.started)

    try:
        wait_until(started, 20, "uvicorn to start", every=0.05)
        yield f"http://{config.host}:{config.port}"
    finally:
        server.should_exit = True
        thread.join(10)


def serve(engine: Engine, tmp: Path, settings: Settings | None = None) -> Iterator[LiveServer]:
    settings = settings or Settings(home=tmp / "home", database_url=str(engine.url))
    app = create_app(settings, dispatcher=RecordingDispatcher(), engine=engine)
    config = uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning",
                            lifespan="on")
    with uvicorn_in_thread(config) as url:
        yield LiveServer(url, engine)


def shot(page, name: str) -> Path:  # type: ignore[no-untyped-def]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
