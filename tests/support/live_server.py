"""A live server for tests and benchmarks: real uvicorn on 127.0.0.1 (a free port); for the
browser tests also Chromium and where screenshots go (``artifacts/screenshots/``, which CI
keeps)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from sqlalchemy import Engine

from service.api.app import create_app
from service.config import Settings
from tests.support.helpers import RecordingDispatcher
from tests.support.paths import REPO_ROOT

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


def serve(engine: Engine, tmp: Path, settings: Settings | None = None) -> Iterator[LiveServer]:
    settings = settings or Settings(home=tmp / "home", database_url=str(engine.url))
    app = create_app(settings, dispatcher=RecordingDispatcher(), engine=engine)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield LiveServer(f"http://127.0.0.1:{port}", engine)
    finally:
        server.should_exit = True
        thread.join(10)


def shot(page, name: str) -> Path:  # type: ignore[no-untyped-def]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
