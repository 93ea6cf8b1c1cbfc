"""Request-scoped dependencies. ``create_app`` stores one :class:`AppContext` on
``app.state``; routes (and the dashboard's pages) reach it only through these functions,
so tests build an app over any engine and dispatcher."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
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


SessionDep = Annotated[Session, Depends(get_session)]
ContextDep = Annotated[AppContext, Depends(get_context)]
