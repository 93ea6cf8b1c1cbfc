"""The HTML dashboard: server-rendered pages over the read-side queries.

``create_app`` includes ``router`` and calls ``mount_static(app)``. Every page reads
without JavaScript; the only script polls a run's status while it is running.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from fastapi.staticfiles import StaticFiles

from service.api.pages import (
    audit,
    breakages,
    conformance,
    flaky,
    login,
    matrix,
    pins,
    prs,
    runs,
    search,
    tests,
    trends,
)
from service.api.templates import STATIC_DIR

router = APIRouter(include_in_schema=False)
for _module in (matrix, runs, breakages, tests, trends, search, pins, conformance, login, audit,
                flaky, prs):
    router.include_router(_module.router)


def mount_static(app: FastAPI) -> None:
    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")


__all__ = ["mount_static", "router"]
