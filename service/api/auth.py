"""Who is asking, and may they: bearer tokens for the API, a signed session cookie (and a
CSRF token in every form) for the dashboard.

Identities are named tokens (``ootci token add``, stored as sha256) with a role; the old
single ``OOTCI_API_TOKEN`` is the admin ``api-token``. Routes and page forms say what they
need with ``Depends(require_role(Role.TRIAGER))``, which answers 401 to nobody and 403 to a
role too low, and yields the :class:`Identity` to name in the audit log.

The session cookie holds no secret: which token logged in (its id, re-checked on every
request, so revoking a token ends its sessions), the session's CSRF token and its expiry,
signed with HMAC-SHA256 (``OOTCI_SESSION_SECRET``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request, status
from sqlalchemy import Engine
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from service.api.deps import AppContext
from service.commands.tokens import token_digest
from service.config import Settings
from service.domain.roles import Role
from service.models import ApiToken
from service.queries.audit import live_token

SESSION_COOKIE = "ootci_session"
# Before login there is no session to hold a CSRF token: the login form's is a cookie of
# its own, matched by the hidden field (double submit).
LOGIN_CSRF_COOKIE = "ootci_login_csrf"
CSRF_FIELD = "csrf"
ENV_TOKEN_ID = 0  # the session of a login with OOTCI_API_TOKEN
ENV_ACTOR = "api-token"


@dataclass(frozen=True)
class Identity:
    actor: str  # as the audit log names it
    role: Role
    token_id: int
    csrf: str = ""  # the session's, when it came from the cookie

    def may(self, needed: Role) -> bool:
        return self.role.allows(needed)


def _from_row(row: ApiToken) -> Identity:
    return Identity(f"token:{row.name}", Role(row.role), row.id)


def authenticate(settings: Settings, engine: Engine, given: str) -> Identity | None:
    """The identity a bearer token ``given`` is, or None."""
    if not given:
        return None
    expected = settings.api_token.get_secret_value()
    if expected and hmac.compare_digest(given.encode(), expected.encode()):
        return Identity(ENV_ACTOR, Role.ADMIN, ENV_TOKEN_ID)
    digest = token_digest(given)
    with Session(engine) as session:
        row = live_token(session, digest)
        if row is None or not hmac.compare_digest(row.token_sha256, digest):
            return None
        return _from_row(row)


def _identity_by_id(settings: Settings, engine: Engine, token_id: int) -> Identity | None:
    if token_id == ENV_TOKEN_ID:
        return Identity(ENV_ACTOR, Role.ADMIN, ENV_TOKEN_ID) if settings.api_token.get_secret_value() \
            else None
    with Session(engine) as session:
        row = session.get(ApiToken, token_id)
        return _from_row(row) if row is not None and row.revoked_at is None else None


# --- the signed cookie ---------------------------------------------------------------


def session_key(request: Request) -> bytes:
    key: bytes = request.app.state.session_key
    return key


def new_session_key(settings: Settings) -> bytes:
    configured = settings.session_secret.get_secret_value()
    return hashlib.sha256(configured.encode()).digest() if configured else secrets.token_bytes(32)


def sign(key: bytes, data: dict[str, Any]) -> str:
    body = base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode()
    mac = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    return f"{body}.{mac}"


def unsign(key: bytes, value: str) -> dict[str, Any] | None:
    body, _, mac = value.rpartition(".")
    if not body or not hmac.compare_digest(
            mac, hmac.new(key, body.encode(), hashlib.sha256).hexdigest()):
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(body.encode()))
    except ValueError:
        return None
    if not isinstance(data, dict) or float(data.get("exp", 0)) < time.time():
        return None
    return data


def set_cookie(request: Request, response: Response, name: str, value: str, max_age: int) -> None:
    ctx: AppContext = request.app.state.ootci
    response.set_cookie(name, value, max_age=max_age, httponly=True, samesite="strict",
                        secure=ctx.settings.public_url.startswith("https://"), path="/")


def start_session(request: Request, response: Response, identity: Identity) -> None:
    ctx: AppContext = request.app.state.ootci
    ttl = ctx.settings.session_hours * 3600
    value = sign(session_key(request), {"tid": identity.token_id,
                                        "csrf": secrets.token_urlsafe(24),
                                        "exp": time.time() + ttl})
    set_cookie(request, response, SESSION_COOKIE, value, ttl)


def session_identity(request: Request) -> Identity | None:
    """The logged-in identity of the dashboard, or None (no cookie, forged, expired, or its
    token revoked since)."""
    cached: Identity | None = getattr(request.state, "ootci_session", None)
    if cached is not None:
        return cached
    data = unsign(session_key(request), request.cookies.get(SESSION_COOKIE, ""))
    if data is None:
        return None
    ctx: AppContext = request.app.state.ootci
    found = _identity_by_id(ctx.settings, ctx.engine, int(data.get("tid", -1)))
    if found is None:
        return None
    who = Identity(found.actor, found.role, found.token_id, str(data.get("csrf", "")))
    request.state.ootci_session = who
    return who


def new_login_csrf(request: Request, response: Response) -> str:
    token = secrets.token_urlsafe(24)
    set_cookie(request, response, LOGIN_CSRF_COOKIE,
               sign(session_key(request), {"csrf": token, "exp": time.time() + 3600}), 3600)
    return token


def login_csrf(request: Request) -> str:
    data = unsign(session_key(request), request.cookies.get(LOGIN_CSRF_COOKIE, ""))
    return str(data.get("csrf", "")) if data else ""


async def check_csrf(request: Request, expected: str) -> None:
    """403 unless the form's hidden CSRF field is ``expected`` (the session's)."""
    form = await request.form()
    given = form.get(CSRF_FIELD)
    if not expected or not isinstance(given, str) or not hmac.compare_digest(given, expected):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "missing or wrong CSRF token: "
                            "reload the page and submit its form again")


# --- the dependency ------------------------------------------------------------------


def bearer_identity(request: Request) -> Identity | None:
    """The identity the request guard found for the bearer token, or None."""
    found: Identity | None = request.scope.get("state", {}).get("ootci_identity")
    return found


def require_role(needed: Role) -> Callable[[Request], Awaitable[Identity]]:
    """A dependency: the caller's identity, when its role allows ``needed``.

    A bearer token (API) is checked by the guard before the body is read; a dashboard form
    comes with the session cookie and, on a POST, must carry the session's CSRF token.
    """

    async def dependency(request: Request) -> Identity:
        who = bearer_identity(request)
        if who is None and "authorization" in request.headers:
            ctx: AppContext = request.app.state.ootci
            scheme, _, given = request.headers["authorization"].partition(" ")
            who = await run_in_threadpool(authenticate, ctx.settings, ctx.engine,
                                          given.strip() if scheme.lower() == "bearer" else "")
        from_cookie = False
        if who is None:
            who = await run_in_threadpool(session_identity, request)
            from_cookie = who is not None
        if who is None:
            raise HTTPException(status.HTTP_401_UNAUTHORIZED,
                                "log in, or send a bearer token (ootci token add)",
                                headers={"WWW-Authenticate": "Bearer"})
        if from_cookie and request.method not in ("GET", "HEAD", "OPTIONS"):
            await check_csrf(request, who.csrf)
        if not who.may(needed):
            raise HTTPException(status.HTTP_403_FORBIDDEN,
                                f"{who.actor} is a {who.role.value}; this needs {needed.value}")
        return who

    return dependency


TriagerDep = Annotated[Identity, Depends(require_role(Role.TRIAGER))]
AdminDep = Annotated[Identity, Depends(require_role(Role.ADMIN))]
