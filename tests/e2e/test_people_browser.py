"""Issue #30 item 1 in a real browser: log in with a named token, quarantine a test from
the /flaky page (a write from a page, in the audit log), a viewer refused with 403, a POST
without the session's CSRF token refused, and logging out ends the session."""

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
from service.models import AuditEntry, Quarantine
from tests.support.factories import make_backend
from tests.support.live_server import LiveServer, serve, shot

pytestmark = pytest.mark.browser
NODEID = "tests/test_ops.py::test_flip"


@pytest.fixture
def people(tmp_path: Path) -> Iterator[tuple[LiveServer, dict[str, str]]]:
    engine = make_engine(f"sqlite:///{tmp_path / 'ootci.db'}")
    upgrade(engine)
    with session_scope(engine) as s:
        make_backend(s, "acme")
        tokens = {role: add_token(s, f"{role}-1", role, actor="test").secret
                  for role in ("viewer", "triager")}
    yield from ((live, tokens) for live in serve(engine, tmp_path))
    engine.dispose()


def log_in(page: Page, live: LiveServer, token: str) -> None:
    page.goto(live.url + "/login")
    page.fill("input[name=token]", token)
    page.click("form.login button[type=submit]")


def test_a_triager_logs_in_quarantines_from_the_page_and_it_is_audited(
    people: tuple[LiveServer, dict[str, str]], page: Page,
) -> None:
    live, tokens = people
    log_in(page, live, tokens["triager"])
    assert page.url.endswith("/audit")
    assert "token:triager-1 (triager)" in page.locator("header .who").inner_text()
    cookie = next(c for c in page.context.cookies() if c["name"] == "ootci_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    page.goto(live.url + "/flaky")
    page.fill("form.quarantine-new input[name=backend]", "acme")
    page.fill("form.quarantine-new input[name=nodeid]", NODEID)
    page.click("form.quarantine-new button[type=submit]")
    page.wait_for_url(live.url + "/flaky")
    row = page.locator(f'tr[data-nodeid="{NODEID}"]')
    assert "quarantined (manual, by token:triager-1" in row.locator("td.quarantine").inner_text()
    shot(page, "flaky-quarantined")
    page.goto(live.url + "/audit")
    assert "flaky.quarantine" in page.locator("table.audit").inner_text()
    with Session(live.engine) as s:
        entry = s.scalars(select(AuditEntry).where(AuditEntry.action == "flaky.quarantine")).one()
        assert (entry.actor, entry.target) == ("token:triager-1", f"test:acme:{NODEID}")
    # Logging out ends the session: the form is gone.
    page.click("form.logout button[type=submit]")
    page.goto(live.url + "/flaky")
    assert page.locator("form.quarantine-new").count() == 0


def test_a_viewer_is_refused_the_write_with_403(
    people: tuple[LiveServer, dict[str, str]], page: Page,
) -> None:
    live, tokens = people
    log_in(page, live, tokens["viewer"])
    page.goto(live.url + "/flaky")
    page.fill("form.quarantine-new input[name=backend]", "acme")
    page.fill("form.quarantine-new input[name=nodeid]", NODEID)
    with page.expect_response(lambda r: r.url.endswith("/flaky/quarantine")) as answer:
        page.click("form.quarantine-new button[type=submit]")
    assert answer.value.status == 403
    assert "viewer" in page.content()
    with Session(live.engine) as s:
        assert s.scalars(select(Quarantine)).all() == []


def test_a_post_without_the_csrf_token_is_refused(
    people: tuple[LiveServer, dict[str, str]], page: Page,
) -> None:
    live, tokens = people
    log_in(page, live, tokens["triager"])
    page.goto(live.url + "/flaky")
    # The form as a forged page would send it: the session cookie, but not its CSRF token.
    page.evaluate("document.querySelector('form.quarantine-new input[name=csrf]').remove()")
    page.fill("form.quarantine-new input[name=backend]", "acme")
    page.fill("form.quarantine-new input[name=nodeid]", NODEID)
    with page.expect_response(lambda r: r.url.endswith("/flaky/quarantine")) as answer:
        page.click("form.quarantine-new button[type=submit]")
    assert answer.value.status == 403
    assert "CSRF" in page.content()
    # And from outside the browser, a wrong token in the field with the real cookie.
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    resp = httpx.post(live.url + "/flaky/quarantine", cookies=cookies,
                      data={"csrf": "guess", "backend": "acme", "nodeid": NODEID})
    assert resp.status_code == 403
    with Session(live.engine) as s:
        assert s.scalars(select(Quarantine)).all() == []


def test_a_bad_token_gets_the_form_again_with_one_line(
    people: tuple[LiveServer, dict[str, str]], page: Page,
) -> None:
    live, _ = people
    log_in(page, live, "ootci_not-a-token")
    assert page.locator("p.error").inner_text() == "That token is unknown or revoked."
    assert not any(c["name"] == "ootci_session" for c in page.context.cookies())
