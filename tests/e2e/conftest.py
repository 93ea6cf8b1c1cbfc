"""Fixtures of the browser tests: a seeded and an empty live server, Debian's Chromium."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from service.db import make_engine
from service.migrate import upgrade
from tests.support.live_server import CHROMIUM, CHROMIUM_ARGS, LiveServer, serve
from tests.support.seed import SeedSpec, seed_database


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


