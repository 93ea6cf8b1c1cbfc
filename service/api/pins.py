"""/api/pins: the newest torch build each backend is green on (the pin-bump candidate)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import SessionDep
from service.queries.pins import GreenBuild, newest_green_builds

router = APIRouter(prefix="/api/pins", tags=["pins"])


@router.get("/green", response_model=list[GreenBuild], summary="Newest green torch per backend")
def newest_green(session: SessionDep) -> list[GreenBuild]:
    return newest_green_builds(session)
