"""Request-scoped dependencies. ``create_app`` stores one :class:`AppContext` on
``app.state``; routes (and the dashboard's pages) reach it only through these functions,
so tests build an app over any engine and dispatcher."""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.config import Settings
from service.dispatch import Dispatcher


@dataclass(frozen=True)
class AppContext:
    settings: Settings
    engine: Engine
    dispatcher: Dispatcher


async def get_context(request: Request) -> AppContext:
    # async: a sync dependency would cost a thread-pool hop on every request.
    ctx: AppContext = request.app.state.ootci
    return ctx


def get_session(ctx: Annotated[AppContext, Depends(get_context)]) -> Iterator[Session]:
    """A session per request. Reads need no commit; writing routes commit explicitly,
    before they enqueue anything."""
    session = Session(ctx.engine, expire_on_commit=False)
    try:
        yield session
    finally:
        session.close()


_bearer = HTTPBearer(auto_error=False, description="OOTCI_API_TOKEN")


def token_refusal(settings: Settings, given: str) -> str | None:
    """Why ``given`` (a bearer token) does not authorise a write, or None when it does."""
    expected = settings.api_token.get_secret_value()
    # An unset token disables writes rather than allowing everyone.
    if not expected:
        return "writes are disabled: OOTCI_API_TOKEN is not set on the server"
    if not hmac.compare_digest(given.encode(), expected.encode()):
        return "a valid bearer token (OOTCI_API_TOKEN) is required"
    return None


def require_token(
    ctx: Annotated[AppContext, Depends(get_context)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    given = credentials.credentials if credentials is not None else ""
    refused = token_refusal(ctx.settings, given)
    if refused is not None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, detail=refused, headers={"WWW-Authenticate": "Bearer"}
        )


SessionDep = Annotated[Session, Depends(get_session)]
ContextDep = Annotated[AppContext, Depends(get_context)]
