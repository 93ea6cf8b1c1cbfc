"""The database away (a failover, a restart): every route answers 503 with ``Retry-After``,
one line of JSON, instead of a 500 and a traceback in the log for each request."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, OperationalError

from service.db import DatabaseUnavailable

log = logging.getLogger(__name__)

RETRY_AFTER_S = 30


def _is_outage(exc: Exception) -> bool:
    return isinstance(exc, OperationalError | DatabaseUnavailable) or (
        isinstance(exc, DBAPIError) and exc.connection_invalidated
    )


def install_outage_handler(app: FastAPI) -> None:
    async def unavailable(request: Request, exc: Exception) -> JSONResponse:
        if not _is_outage(exc):
            raise exc
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        log.warning("%s %s: database unavailable: %s", request.method, request.url.path,
                    first[0] if first else type(exc).__name__)
        return JSONResponse(
            {"detail": "the database is unavailable; retry later"},
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )

    for kind in (OperationalError, DBAPIError, DatabaseUnavailable):
        app.add_exception_handler(kind, unavailable)
