"""The FastAPI application: JSON API, webhooks, health and metrics.

``create_app`` takes every dependency (no globals), so the CLI (``ootci serve``), the
production factory and the tests each build their own. ``app_factory`` is for
``uvicorn --factory service.api.app:app_factory`` in production: settings from the
environment, runs dispatched through the broker.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy import Engine
from starlette.middleware.trustedhost import TrustedHostMiddleware

from service.api import (
    audit,
    backends,
    breakages,
    conformance,
    flaky,
    health,
    matrix,
    metrics,
    notifications,
    pages,
    pins,
    prs,
    runs,
    webhooks,
)
from service.api.auth import new_session_key
from service.api.delivery_log import DeliveryRecorder
from service.api.deps import AppContext
from service.api.guard import RequestGuard
from service.api.headers import SecurityHeaders
from service.api.outage import install_outage_handler
from service.config import Settings, get_settings
from service.db import get_engine
from service.dispatch import CeleryDispatcher, Dispatcher

if TYPE_CHECKING:
    import uvicorn


def create_app(
    settings: Settings, *, dispatcher: Dispatcher, engine: Engine | None = None
) -> FastAPI:
    engine = engine if engine is not None else get_engine(settings.resolved_database_url)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        await recorder.close()
        dispatcher.close()

    app = FastAPI(
        title="ootci",
        summary="Nightly upstream-compatibility CI for PyTorch's PrivateUse1 backends",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.ootci = AppContext(settings=settings, engine=engine, dispatcher=dispatcher)
    recorder = app.state.delivery_recorder = DeliveryRecorder(engine)
    for module in (runs, backends, matrix, breakages, pins, webhooks, health, metrics, conformance,
                   audit, flaky, notifications, prs):
        app.include_router(module.router)
    app.include_router(pages.router)
    pages.mount_static(app)
    app.add_middleware(RequestGuard, settings=settings, engine=engine)
    app.state.session_key = new_session_key(settings)
    # Outermost but one: every answer gets the headers, the guard's 401/413 included; a
    # request for a host the operator does not serve is refused before anything else.
    app.add_middleware(SecurityHeaders)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=settings.resolved_trusted_hosts)
    install_outage_handler(app)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's default handler echoes the input back; a 10 MB bad body would be
        # returned whole. Keep locations and messages only.
        errors = [
            {"loc": e.get("loc"), "msg": e.get("msg"), "type": e.get("type")} for e in exc.errors()
        ]
        return JSONResponse({"detail": errors}, status_code=422)

    @app.exception_handler(HTTPException)
    async def _http(_request: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse(
            {"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers
        )

    return app


def default_dispatcher(settings: Settings) -> Dispatcher:
    if settings.in_process:
        raise RuntimeError(
            "no broker configured (OOTCI_BROKER_URL): pass an InProcessDispatcher "
            "(`ootci serve` does) or set a broker"
        )
    return CeleryDispatcher(settings.broker_url)


def app_factory() -> FastAPI:
    # uvicorn imports the factory in the process that serves (one worker, as the images
    # run it): secrets out of its environment before the settings are read.
    from service.secrets import SecretsError, load_and_scrub

    try:
        load_and_scrub()
    except SecretsError as exc:
        sys.stderr.write(f"error: {exc}\n")
        raise SystemExit(2) from None
    settings = get_settings()
    return create_app(settings, dispatcher=default_dispatcher(settings))


def uvicorn_config(
    settings: Settings, app: FastAPI, host: str = "127.0.0.1", port: int = 8000
) -> uvicorn.Config:
    """X-Forwarded-For/-Proto are believed only from the proxies the operator names
    (``OOTCI_FORWARDED_ALLOW_IPS``); uvicorn would otherwise believe any local process."""
    import uvicorn

    return uvicorn.Config(app, host=host, port=port, log_level="info", **proxy_options(settings))


def proxy_options(settings: Settings) -> dict[str, Any]:
    """uvicorn's proxy options from ``OOTCI_FORWARDED_ALLOW_IPS``: without any listed proxy
    its middleware is left out (uvicorn would otherwise believe 127.0.0.1, or whatever its
    own FORWARDED_ALLOW_IPS variable says)."""
    proxies = ",".join(settings.forwarded_allow_ips)
    return {"proxy_headers": bool(proxies), "forwarded_allow_ips": proxies or None}


def serve(
    settings: Settings,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    dispatcher: Dispatcher | None = None,
    engine: Engine | None = None,
) -> None:
    """Run the app under uvicorn until interrupted (``ootci serve``)."""
    import uvicorn

    app = create_app(settings, dispatcher=dispatcher or default_dispatcher(settings), engine=engine)
    uvicorn.Server(uvicorn_config(settings, app, host, port)).run()
