"""The dashboard in a real browser against a live server with seeded data."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from service.commands.log_chunks import append_log_chunk
from service.models import Backend, Breakage, Failure, Run, Step
from tests.support.factories import make_run
from tests.support.live_server import LiveServer, shot

pytestmark = pytest.mark.browser


def test_matrix_shows_the_seeded_verdicts(live: LiveServer, page) -> None:  # type: ignore[no-untyped-def]
    with Session(live.engine) as s:
        # The newest upstream build break and the newest fully green nightly run.
        failure = s.scalars(select(Failure).where(Failure.stage == "build",
                                                  Failure.category == "upstream")
                            .order_by(Failure.id.desc())).first()
        assert failure is not None
        run = s.get(Run, failure.run_id)
        assert run is not None and run.torch_build is not None
        broken_backend = s.get(Backend, run.backend_id).name  # type: ignore[union-attr]
        broken_label = run.torch_build.version
    page.goto(live.url + "/")
    shot(page, "matrix")
    row = page.locator("#matrix tbody tr", has_text=broken_label)
    assert row.count() == 1
    cell = row.locator(f'td[data-backend="{broken_backend}"][data-stage="build"]')
    assert cell.get_attribute("data-verdict") == "upstream"
    # Not colour alone: a glyph and a word, and the subtype on hover.
    assert cell.inner_text().strip() == "✗up"
    assert failure.subtype in (cell.locator("a").get_attribute("title") or "")
    # With the build broken, the later stages of that run did not run.
    imp = row.locator(f'td[data-backend="{broken_backend}"][data-stage="import"]')
    assert imp.get_attribute("data-verdict") == "notrun"
    # Every backend of the seed has columns, and green cells exist.
    heads = page.locator("th.backend-h").all_inner_texts()
    assert sorted(heads) == sorted(live_backends(live))
    assert page.locator('td[data-verdict="pass"]').count() > 100


def live_backends(live: LiveServer) -> list[str]:
    with Session(live.engine) as s:
        return list(s.scalars(select(Backend.name)))


def test_backend_filter_and_only_changed(live: LiveServer, page) -> None:  # type: ignore[no-untyped-def]
    page.goto(live.url + "/")
    all_rows = page.locator("#matrix tbody tr").count()
    page.select_option("select[name=backend]", "acme_npu")  # filters.js submits on change
    page.wait_for_url(re.compile(r"backend=acme_npu"))
    assert page.locator("th.backend-h").all_inner_texts() == ["acme_npu"]
    page.check("input[name=changed]")
    page.wait_for_url(re.compile(r"changed=true"))
    shot(page, "matrix-acme-changed")
    changed_rows = page.locator("#matrix tbody tr").count()
    assert 0 < changed_rows < all_rows
    assert page.locator("#matrix tbody tr:not(.changed)").count() == 0


def test_clicking_a_red_cell_opens_the_run_with_the_decisive_line(
    live: LiveServer, page  # type: ignore[no-untyped-def]
) -> None:
    page.goto(live.url + "/")
    # A build break: its evidence is a line of the build log, which the run page links to.
    red = page.locator('td.cell[data-stage="build"][data-verdict="upstream"] a').first
    href = red.get_attribute("href") or ""
    run_id = int(href.rstrip("/").rsplit("/", 1)[1])
    red.click()
    page.wait_for_url(re.compile(rf"/runs/{run_id}$"))
    decisive = page.locator(".ln.decisive").first
    decisive.wait_for()
    with Session(live.engine) as s:
        first = s.scalars(select(Failure).where(Failure.run_id == run_id)
                          .order_by(Failure.id)).first()
        assert first is not None
    assert first.line in decisive.inner_text()
    # Highlighted: the mark, and a visibly different background.
    assert decisive.locator("mark").count() == 1
    bg = decisive.evaluate("el => getComputedStyle(el).backgroundColor")
    plain = page.locator(".ln:not(.decisive)").first.evaluate(
        "el => getComputedStyle(el).backgroundColor")
    assert bg != plain
    assert page.get_by_text("Why this verdict").first.is_visible()
    assert page.get_by_text(first.rule or "").first.is_visible()
    shot(page, "run-failed")
    # The evidence links into the paged full log, at the same highlighted line.
    page.locator("figure.evidence figcaption a").first.click()
    page.wait_for_url(re.compile(r"/log\?page=\d+&hl=\d+"))
    assert first.line in page.locator(".ln.decisive").inner_text()
    shot(page, "log-decisive")


def test_breakage_page_shows_its_history(live: LiveServer, page) -> None:  # type: ignore[no-untyped-def]
    with Session(live.engine) as s:
        b = s.scalars(select(Breakage).where(Breakage.occurrences >= 3)
                      .order_by(Breakage.id)).first()
        assert b is not None
        runs = set(s.scalars(select(Failure.run_id).where(Failure.breakage_id == b.id)))
    page.goto(live.url + "/breakages")
    shot(page, "breakages")
    statuses = page.locator("#breakages tbody tr td:nth-child(2)").all_inner_texts()
    # Open first.
    assert statuses == sorted(statuses, key=lambda s: s != "open")
    page.goto(live.url + f"/breakages/{b.id}")
    history = page.locator("#history tbody tr")
    assert history.count() == len(runs)
    linked = {int(h.rsplit("/", 1)[1]) for h in
              page.locator("#history tbody tr td:nth-child(2) a").evaluate_all(
                  "els => els.map(e => e.getAttribute('href'))")}
    assert linked == runs
    assert page.locator("section[aria-labelledby=evidence-h] .ln.decisive").count() == 1
    shot(page, "breakage")


def test_running_run_updates_without_reload(live: LiveServer, page) -> None:  # type: ignore[no-untyped-def]
    with Session(live.engine) as s:
        run = s.scalars(select(Run).where(Run.state == "running")).first()
        assert run is not None, "the seed leaves one run running"
        run_id = run.id
    page.goto(live.url + f"/runs/{run_id}")
    assert page.locator('tr[data-step="test"] .badge').inner_text() == "running"
    page.evaluate("window.__sameDocument = true")
    with Session(live.engine) as s, s.begin():
        s.execute(update(Step).where(Step.run_id == run_id, Step.name.in_(("test", "collect")))
                  .values(status="passed", duration_s=42.0))
        s.execute(update(Run).where(Run.id == run_id).values(state="passed", verdict="compatible"))
    page.locator('tr[data-step="test"] .badge', has_text="passed").wait_for(timeout=10_000)
    page.locator("#run-state .badge", has_text="passed").wait_for(timeout=10_000)
    assert page.evaluate("window.__sameDocument") is True  # no full reload happened
    assert "42.0 s" in page.locator('tr[data-step="test"] td.duration').inner_text()
    shot(page, "run-live-finished")


def test_a_running_steps_log_grows_on_the_page_without_reload(  # type: ignore[no-untyped-def]
    live: LiveServer, page
) -> None:
    first = b"collected 3 items\ntests/test_a.py::test_one PASSED\ntests/test_a.py::test_t"
    more = "wo PASSED\r\ntests/test_a.py::test_été FAILED ✗\nshort test summary\n".encode()
    with Session(live.engine) as s, s.begin():
        backend = s.scalars(select(Backend)).first()
        assert backend is not None
        run = make_run(s, backend, spec="installed", state="running")
        step = Step(run_id=run.id, name="test", status="running")
        s.add(step)
        s.flush()
        append_log_chunk(s, step.id, 0, 0, first)  # what the worker has streamed so far
        run_id, step_id = run.id, step.id
    page.goto(live.url + f"/runs/{run_id}/steps/test/log")
    assert page.locator("#L3").inner_text().endswith("tests/test_a.py::test_t")
    page.evaluate("window.__sameDocument = true")

    with Session(live.engine) as s, s.begin():  # finishes line 3, adds two, one non-ASCII
        append_log_chunk(s, step_id, 1, len(first), more)
    page.locator("#L5", has_text="short test summary").wait_for(timeout=10_000)
    assert page.locator("#L3").inner_text() == "3tests/test_a.py::test_two PASSED"
    assert page.locator("#L4").inner_text() == "4tests/test_a.py::test_été FAILED ✗"

    with Session(live.engine) as s, s.begin():
        step = s.scalars(select(Step).where(Step.run_id == run_id)).one()
        step.status = "failed"
        step.store_log(first + more)
    page.locator('#log-live-note[data-state="finished"]').wait_for(timeout=10_000)
    assert page.evaluate("window.__sameDocument") is True
    assert page.locator("pre#log .ln").count() == 5
    assert page.locator("#log-lines").inner_text() == "5"
    shot(page, "log-live-finished")


def test_other_pages_render(live: LiveServer, page) -> None:  # type: ignore[no-untyped-def]
    page.goto(live.url + "/trends")
    assert page.locator("svg.chart").count() == 2
    shot(page, "trends")
    page.fill("#q", "PrivateUse1HooksInterface")
    page.press("#q", "Enter")
    page.wait_for_url(re.compile(r"/search\?q="))
    assert page.locator("#sb-h").is_visible()
    assert page.locator("section[aria-labelledby=sf-h] tbody tr").count() > 0
    shot(page, "search")
    page.goto(live.url + "/tests")
    page.get_by_role("link", name=re.compile("test_autocast_bf16")).first.click()
    page.wait_for_url(re.compile(r"/tests\?nodeid="))
    assert page.locator("#grid td.o-failed").count() > 0
    assert page.locator("#grid td.o-passed").count() > 0
    shot(page, "test-history")


def test_empty_state(empty_live: LiveServer, page) -> None:  # type: ignore[no-untyped-def]
    page.goto(empty_live.url + "/")
    assert page.get_by_role("heading", name="No runs yet").is_visible()
    assert page.locator("pre.cmd").inner_text().strip() == "ootci run"
    shot(page, "empty")
