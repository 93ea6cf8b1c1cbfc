"""Issue #30 item 2 in a real browser: a triager logs in and, from the breakage page, notes,
snoozes, disputes a suspect and closes it (each in the audit log, the page showing it); a
viewer is refused each with 403; a form without the session's CSRF token is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.commands.tokens import add_token
from service.db import make_engine, session_scope
from service.migrate import upgrade
from service.models import AuditEntry, Breakage, RunState
from tests.support.factories import make_backend, make_breakage, make_run
from tests.support.live_server import LiveServer, serve, shot

pytestmark = pytest.mark.browser
SUSPECTS = [{"sha": "a" * 40, "pr": 120969, "title": "make allocate const", "score": 0.9,
             "reasons": ["edits c10/core/Allocator.h"]},
            {"sha": "b" * 40, "pr": 120970, "title": "docs", "score": 0.2, "reasons": []}]
Served = tuple[LiveServer, dict[str, str], int]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    engine = make_engine(f"sqlite:///{tmp_path / 'ootci.db'}")
    upgrade(engine)
    with session_scope(engine) as s:
        backend = make_backend(s, "acme")
        red = make_run(s, backend, state=RunState.FAILED, git="c" * 40)
        breakage_id = make_breakage(s, backend, red, culprits=SUSPECTS,
                                    title="signature-changed: allocate").id
        tokens = {role: add_token(s, f"{role}-1", role, actor="test").secret
                  for role in ("viewer", "triager")}
    yield from ((live, tokens, breakage_id) for live in serve(engine, tmp_path))
    engine.dispose()


def log_in(page: Page, live: LiveServer, token: str) -> None:
    page.goto(live.url + "/login")
    page.fill("input[name=token]", token)
    page.click("form.login button[type=submit]")
    page.wait_for_url(lambda url: "/login" not in url)


def _actions(live: LiveServer) -> list[tuple[str, str]]:
    with Session(live.engine) as s:
        return [(e.actor, e.action) for e in s.scalars(select(AuditEntry).order_by(AuditEntry.id))
                if e.action.startswith("breakage.")]


def test_a_triager_notes_snoozes_disputes_and_closes_from_the_page(
    served: Served, page: Page,
) -> None:
    live, tokens, bid = served
    log_in(page, live, tokens["triager"])
    at = f"{live.url}/breakages/{bid}"
    page.goto(at)

    page.fill("form.triage-note textarea[name=note]", "Same as the allocator bug last month")
    page.click("form.triage-note button[type=submit]")
    page.wait_for_url(at)
    assert page.locator("#note").inner_text() == "Same as the allocator bug last month"

    page.fill("form.triage-snooze input[name=until]", "2099-01-01")
    page.fill("form.triage-snooze input[name=reason]", "known, fixed upstream")
    page.click("form.triage-snooze button[type=submit]")
    page.wait_for_url(at)
    snooze = page.locator("#snooze").inner_text()
    assert "Snoozed" in snooze and "token:triager-1" in snooze and "known, fixed upstream" in snooze

    page.select_option("form.triage-dispute select[name=pr]", "120969")
    page.fill("form.triage-dispute input[name=reason]", "it only renames a test helper")
    page.click("form.triage-dispute button[type=submit]")
    page.wait_for_url(at)
    assert "Not #120969, said token:triager-1: it only renames a test helper" in \
        page.locator("li.dispute").inner_text()
    assert page.locator("#suspects tr.disputed").count() == 1
    assert "disputed" in page.locator("#suspects tr.disputed").inner_text()

    page.fill("form.triage-close input[name=reason]", "fixed in the vendor")
    page.click("form.triage-close button[type=submit]")
    page.wait_for_url(at)
    assert page.locator("h1 .badge").inner_text() == "closed"
    assert "fixed in the vendor" in page.locator("#closed").inner_text()
    assert page.locator("form.triage-reopen").count() == 1
    shot(page, "breakage-triaged")

    actor = "token:triager-1"
    assert _actions(live) == [(actor, "breakage.note"), (actor, "breakage.snooze"),
                              (actor, "breakage.dispute"), (actor, "breakage.close")]
    with Session(live.engine) as s:
        b = s.get_one(Breakage, bid)
        assert (b.status, b.disputes[0]["pr"], b.snooze_reason) == (
            "closed", 120969, "known, fixed upstream")


def test_a_viewer_is_refused_each_action_with_403(served: Served, page: Page) -> None:
    live, tokens, bid = served
    log_in(page, live, tokens["viewer"])
    at = f"{live.url}/breakages/{bid}"
    for form, fill in (("triage-note", {"textarea[name=note]": "x"}),
                       ("triage-snooze", {"input[name=until]": "2099-01-01"}),
                       ("triage-dispute", {"input[name=reason]": "not it"}),
                       ("triage-close", {})):
        page.goto(at)
        for field, value in fill.items():
            page.fill(f"form.{form} {field}", value)
        action = form.removeprefix("triage-")
        with page.expect_response(lambda r, a=action: r.url.endswith(f"/{a}")) as answer:
            page.click(f"form.{form} button[type=submit]")
        assert answer.value.status == 403, form
        assert "viewer" in page.content()
    assert _actions(live) == []


def test_a_form_without_the_csrf_token_is_refused(served: Served, page: Page) -> None:
    live, tokens, bid = served
    log_in(page, live, tokens["triager"])
    page.goto(f"{live.url}/breakages/{bid}")
    page.evaluate("document.querySelector('form.triage-close input[name=csrf]').remove()")
    with page.expect_response(lambda r: r.url.endswith("/close")) as answer:
        page.click("form.triage-close button[type=submit]")
    assert answer.value.status == 403
    assert "CSRF" in page.content()
    # From outside the browser: the real cookie, a guessed token, the other helper's PR
    # page's field names (pr, reason) on the dispute route.
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    resp = httpx.post(f"{live.url}/breakages/{bid}/dispute", cookies=cookies,
                      data={"csrf": "guess", "pr": "120969", "reason": "x"})
    assert resp.status_code == 403
    assert _actions(live) == []
    with Session(live.engine) as s:
        assert s.get_one(Breakage, bid).status == "open"
