"""A live dashboard for the browser tests: real uvicorn on 127.0.0.1 (a free port) over a
seeded SQLite database, and Debian's Chromium driven by Playwright.

Screenshots go to ``artifacts/screenshots/`` (CI keeps that folder)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn
from sqlalchemy import Engine

from service.api.app import create_app
from service.config import Settings
from service.db import make_engine
from service.migrate import upgrade
from service.seed import SeedSpec, seed_database

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


class RecordingDispatcher:
    """The dashboard never enqueues; this satisfies create_app's Dispatcher protocol."""

    def __init__(self) -> None:
        self.enqueued: list[int] = []

    def enqueue_run(self, run_id: int) -> None:
        self.enqueued.append(run_id)

    def check(self) -> None:
        return None

    def close(self) -> None:
        return None


@dataclass
class LiveServer:
    url: str
    engine: Engine


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(engine: Engine, tmp: Path) -> Iterator[LiveServer]:
    settings = Settings(home=tmp / "home", database_url=str(engine.url))
    app = create_app(settings, dispatcher=RecordingDispatcher(), engine=engine)
    port = _free_port()
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


@pytest.fixture(scope="session")
def seed_spec() -> SeedSpec:
    return SeedSpec()


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory, seed_spec: SeedSpec) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("e2e")
    engine = make_engine(f"sqlite:///{tmp / 'ootci.db'}")
    upgrade(engine)
    seed_database(engine, seed_spec)
    yield from serve(engine, tmp)
    engine.dispose()


@pytest.fixture(scope="session")
def empty_live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("e2e-empty")
    engine = make_engine(f"sqlite:///{tmp / 'ootci.db'}")
    upgrade(engine)
    yield from serve(engine, tmp)
    engine.dispose()


@pytest.fixture(scope="session")
def browser():  # type: ignore[no-untyped-def]
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    # The dashboard must never reach beyond its own origin (no CDN, users may be offline).
    external: list[str] = []
    page.on("request", lambda r: external.append(r.url)
            if not r.url.startswith(("http://127.0.0.1", "data:", "about:")) else None)
    yield page
    context.close()
    assert not external, f"the page requested outside resources: {external}"


def shot(page, name: str) -> Path:  # type: ignore[no-untyped-def]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
