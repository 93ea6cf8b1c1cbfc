"""/healthz: can this process reach the database and the broker right now?"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from service.api.deps import ContextDep
from service.db import DatabaseUnavailable, check_connection
from service.dispatch import BrokerUnavailable
from service.domain.redaction import hide_url_passwords
from service.schemas import Health

router = APIRouter(tags=["health"])


@router.get(
    "/healthz",
    response_model=Health,
    responses={503: {"model": Health, "description": "A dependency is down; checks say why"}},
    summary="Database and broker checks",
)
async def healthz(ctx: ContextDep) -> JSONResponse:
    checks: dict[str, str] = {}
    try:
        await run_in_threadpool(check_connection, ctx.engine)
        checks["database"] = "ok"
    except DatabaseUnavailable as exc:
        checks["database"] = str(exc)
    except Exception as exc:  # a driver error that is not a connection failure
        checks["database"] = f"database check failed: {type(exc).__name__}: {exc}"
    if ctx.settings.in_process:
        checks["broker"] = "ok (none configured: runs execute in-process)"
    else:
        try:
            await run_in_threadpool(ctx.dispatcher.check)
            checks["broker"] = "ok"
        except BrokerUnavailable as exc:
            checks["broker"] = str(exc)
    # A driver's or broker's message may quote the URL it failed on, password and all.
    checks = {name: hide_url_passwords(text) for name, text in checks.items()}
    healthy = all(v.startswith("ok") for v in checks.values())
    body = Health(status="ok" if healthy else "unavailable", checks=checks)
    return JSONResponse(body.model_dump(), status_code=200 if healthy else 503)
