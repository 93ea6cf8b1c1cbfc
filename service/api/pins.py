"""/api/pins: the newest torch build each backend is green on (the pin-bump candidate)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import SessionDep
from service.api.schemas import GreenBuildOut
from service.queries.pins import newest_green_builds

router = APIRouter(prefix="/api/pins", tags=["pins"])


@router.get("/green", response_model=list[GreenBuildOut], summary="Newest green torch per backend")
def newest_green(session: SessionDep) -> list[GreenBuildOut]:
    return [GreenBuildOut.model_validate(g) for g in newest_green_builds(session)]
