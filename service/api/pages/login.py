"""Log in to the dashboard with a token, and out: the session cookie (``service/api/auth.py``).

The token is typed into a form (POST, never a URL: it would land in logs and history) and
only ever compared, never stored in the cookie.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, HTTPException, Request, status
from starlette.concurrency import run_in_threadpool
from starlette.responses import HTMLResponse, RedirectResponse, Response

from service.api.auth import (
    SESSION_COOKIE,
    authenticate,
    check_csrf,
    login_csrf,
    new_login_csrf,
    session_identity,
    start_session,
)
from service.api.deps import ContextDep
from service.api.templates import render

router = APIRouter()


def _form(request: Request, error: str | None, code: int) -> HTMLResponse:
    placeholder = HTMLResponse()
    csrf = new_login_csrf(request, placeholder)
    page = render(request, "login.html", {"page_title": "Log in", "csrf": csrf, "error": error},
                  code)
    page.headers.append("set-cookie", placeholder.headers["set-cookie"])
    return page


@router.get("/login", response_class=HTMLResponse, name="dash_login")
def login_page(request: Request) -> HTMLResponse:
    return _form(request, None, 200)


@router.post("/login", name="dash_login_post")
async def login(
    request: Request, ctx: ContextDep, token: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    await check_csrf(request, login_csrf(request))
    who = await run_in_threadpool(authenticate, ctx.settings, ctx.engine, token.strip())
    if who is None:
        return _form(request, "That token is unknown or revoked.", 401)
    response = RedirectResponse(str(request.url_for("dash_audit")), status.HTTP_303_SEE_OTHER)
    start_session(request, response, who)
    response.delete_cookie("ootci_login_csrf", path="/")
    return response


@router.post("/logout", name="dash_logout")
async def logout(request: Request) -> Response:
    who = await run_in_threadpool(session_identity, request)
    if who is None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "not logged in")
    await check_csrf(request, who.csrf)
    response = RedirectResponse(str(request.url_for("dash_login")), status.HTTP_303_SEE_OTHER)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
