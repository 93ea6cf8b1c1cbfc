"""The flaky tests page, with quarantine and release forms for logged-in triagers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Query, Request, status
from starlette.responses import HTMLResponse, RedirectResponse

from service.api.auth import Identity, require_role
from service.api.deps import ContextDep, SessionDep
from service.api.templates import render
from service.commands.flaky import FlakyError, quarantine, release
from service.domain.roles import Role
from service.queries import flaky as q

router = APIRouter()
Text = Annotated[str, Form(min_length=1, max_length=1000, pattern=r"^[^\x00]*$")]
# Declared before the form fields, so the CSRF check reads the form first.
Triager = Annotated[Identity, Depends(require_role(Role.TRIAGER))]


@router.get("/flaky", response_class=HTMLResponse, name="dash_flaky")
def flaky_page(
    request: Request, session: SessionDep, ctx: ContextDep,
    backend: Annotated[str | None, Query(max_length=100, pattern=r"^[^\x00]*$")] = None,
) -> HTMLResponse:
    rows = q.flaky_tests(session, ctx.settings.flaky_window, backend=backend or None)
    return render(request, "flaky.html", {
        "page_title": "Flaky tests", "rows": rows, "window": ctx.settings.flaky_window,
        "threshold": ctx.settings.flaky_quarantine_rate,
        "release_after": ctx.settings.flaky_release_after, "backend": backend or ""})


def _act(request: Request, session: SessionDep, do: Callable[[], object]) -> RedirectResponse:
    try:
        do()
    except FlakyError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    session.commit()
    return RedirectResponse(str(request.url_for("dash_flaky")), status.HTTP_303_SEE_OTHER)


@router.post("/flaky/quarantine", name="dash_flaky_quarantine")
def quarantine_form(
    request: Request, session: SessionDep, who: Triager, backend: Text, nodeid: Text,
) -> RedirectResponse:
    return _act(request, session, lambda: quarantine(session, backend, nodeid, actor=who.actor))


@router.post("/flaky/release", name="dash_flaky_release")
def release_form(
    request: Request, session: SessionDep, who: Triager, backend: Text, nodeid: Text,
) -> RedirectResponse:
    return _act(request, session, lambda: release(session, backend, nodeid, actor=who.actor))
