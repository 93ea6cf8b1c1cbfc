"""Issue #30 item 4 in a real browser: the header's search box finds an upstream PR by
number and by a torch sha prefix, its page renders both backends' runs, the confirmed
suspect and the repro command, and every link on it resolves."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page

from service.db import make_engine, session_scope
from service.migrate import upgrade
from tests.support.factories import make_backend, make_breakage, make_run, make_torch_build
from tests.support.live_server import LiveServer, serve, shot

pytestmark = pytest.mark.browser
PR = 120969
HEAD = "ab12cd34" + "e" * 32
RED = "cdcd0001" + "2" * 32
WHEEL = "wheel:https://download.example/pr-120969/torch-2.15.0-cp312-linux_x86_64.whl"


@pytest.fixture
def pr_live(tmp_path: Path) -> Iterator[LiveServer]:
    engine = make_engine(f"sqlite:///{tmp_path / 'ootci.db'}")
    upgrade(engine)
    with session_scope(engine) as s:
        acme, vendor = make_backend(s, "acme"), make_backend(s, "vendor_x")
        make_torch_build(s, HEAD, spec=WHEEL, version="2.15.0a0+gitab12cd3", source_kind="wheel")
        for backend, state, verdict in ((acme, "failed", "upstream"), (vendor, "passed", "compatible")):
            make_run(s, backend, spec=WHEEL, git=HEAD, state=state, verdict=verdict, trigger="webhook",
                     dedupe_key=f"pr:{PR}:{HEAD}:{backend.id}",
                     trigger_info={"pr": PR, "sha": HEAD, "title": "Refactor the allocator hooks"})
        red = make_run(s, acme, spec="nightly:2026-10-01", git=RED, state="failed", verdict="upstream")
        verify = make_run(s, acme, spec="path:/tmp/overlay", state="passed", trigger="verify")
        make_breakage(s, acme, red, title="signature-changed: allocate", range_head_sha=RED,
                      culprits=[{"sha": "9" * 40, "pr": PR, "title": "Refactor", "score": 0.82,
                                 "reasons": ["edits c10/core/Allocator.h"],
                                 "verification": {"state": "confirmed", "run_id": verify.id,
                                                  "evidence": "undoing it makes acme pass"}}])
    yield from serve(engine, tmp_path)
    engine.dispose()


def _search(page: Page, live: LiveServer, q: str) -> None:
    page.goto(live.url + "/breakages")
    page.fill("header form.search input[name=q]", q)
    page.click("header form.search button[type=submit]")
    page.wait_for_url(f"{live.url}/search*")


def test_the_search_box_finds_the_pr_and_its_page_renders(pr_live: LiveServer, page: Page) -> None:
    _search(page, pr_live, f"#{PR}")
    page.click(f"#id-hits a:has-text('PR #{PR}')")
    page.wait_for_url(f"{pr_live.url}/prs/{PR}")
    assert page.locator("h1").inner_text() == f"PR #{PR}: Refactor the allocator hooks"
    assert page.locator("#pr-runs tbody tr").count() == 2
    assert page.locator("#suspicions tbody tr.verify-confirmed").count() == 1
    assert f"ootci run --torch commit:{RED} --backend acme" in page.locator("#repro").inner_text()
    assert page.locator("form.dispute").count() == 0  # not logged in
    shot(page, "pr-page")
    hrefs = page.eval_on_selector_all("main a[href]", "els => els.map(e => e.href)")
    local = {h.split("#")[0] for h in hrefs if h.startswith(pr_live.url)}
    assert len(local) >= 4  # two runs, the breakage, the verification run
    for href in local:
        assert httpx.get(href).status_code == 200, href

    _search(page, pr_live, HEAD[:9])
    assert page.locator(f"#id-hits a[href$='/prs/{PR}']").count() == 1
    assert page.locator("#id-runs tbody tr").count() == 2
