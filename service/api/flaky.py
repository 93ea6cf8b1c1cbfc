"""``GET /api/flaky``: flaky and quarantined tests; ``POST /api/flaky/quarantine`` and
``/release`` (triagers): a person's quarantine decisions."""

from __future__ import annotations

import datetime as dt
from typing import Any

from fastapi import APIRouter, HTTPException, status
from pydantic import BaseModel, Field

from service.api.auth import TriagerDep
from service.api.deps import ContextDep, SessionDep
from service.api.params import TextFilter
from service.commands.flaky import FlakyError, quarantine, release
from service.queries import flaky as q
from service.schemas import Problem

router = APIRouter(prefix="/api/flaky", tags=["flaky"])


class QuarantineOut(BaseModel):
    reason: str
    by: str
    rate: float | None
    since: dt.datetime
    clean_runs: int


class FlakyOut(BaseModel):
    backend: str
    nodeid: str
    runs: int = Field(description="Runs in the window that recorded the test")
    not_passed: int
    rate: float
    flaky: bool
    why: str
    quarantine: QuarantineOut | None


class QuarantineRequest(BaseModel):
    backend: str = Field(max_length=100)
    nodeid: str = Field(min_length=1, max_length=1000, pattern=r"^[^\x00]*$")


def flaky_out(row: q.FlakyRow) -> FlakyOut:
    held = row.quarantine
    return FlakyOut(
        backend=row.backend, nodeid=row.nodeid, runs=row.stat.runs,
        not_passed=row.stat.not_passed, rate=round(row.stat.rate, 4), flaky=row.stat.flaky,
        why=row.stat.reason,
        quarantine=QuarantineOut(reason=held.reason, by=held.by, rate=held.rate,
                                 since=held.since, clean_runs=held.clean_runs)
        if held else None)


@router.get("", response_model=list[FlakyOut],
            summary="Flaky tests over each backend's last OOTCI_FLAKY_WINDOW runs, and the "
            "quarantined ones")
def list_flaky(session: SessionDep, ctx: ContextDep, backend: TextFilter = None) -> list[FlakyOut]:
    return [flaky_out(r) for r in q.flaky_tests(session, ctx.settings.flaky_window,
                                                backend=backend)]


_WRITE: dict[int | str, dict[str, Any]] = {401: {"model": Problem}, 403: {"model": Problem},
          422: {"model": Problem, "description": "Unknown backend, or already (not) quarantined"}}


@router.post("/quarantine", status_code=status.HTTP_204_NO_CONTENT, responses=_WRITE,
             summary="Quarantine a test: it runs, but cannot fail a run or open a breakage")
def put_in(session: SessionDep, body: QuarantineRequest, who: TriagerDep) -> None:
    try:
        quarantine(session, body.backend, body.nodeid, actor=who.actor)
    except FlakyError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    session.commit()


@router.post("/release", status_code=status.HTTP_204_NO_CONTENT, responses=_WRITE,
             summary="Take a test out of quarantine")
def take_out(session: SessionDep, body: QuarantineRequest, who: TriagerDep) -> None:
    try:
        release(session, body.backend, body.nodeid, actor=who.actor)
    except FlakyError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    session.commit()
