"""/api/pins: the newest torch build each backend is green on (the pin-bump candidate)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from service.api.deps import SessionDep
from service.documents import pin_report_list
from service.queries.pins import GreenBuild, newest_green_builds
from service.schemas import PinReportOut

router = APIRouter(prefix="/api/pins", tags=["pins"])


@router.get("/green", response_model=list[GreenBuild], summary="Newest green torch per backend")
def newest_green(session: SessionDep) -> list[GreenBuild]:
    return newest_green_builds(session)


@router.get("/reports", response_model=list[PinReportOut], summary="Stored weekly pin reports")
def pin_reports(
    session: SessionDep,
    weeks: Annotated[int, Query(ge=1, le=52)] = 4,
    backend: str | None = None,
) -> list[PinReportOut]:
    return pin_report_list(session, weeks=weeks, backend=backend)
