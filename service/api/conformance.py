"""/api/conformance: each backend's latest conformance results, per mechanism."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import SessionDep
from service.documents import conformance_matrix
from service.schemas import ConformanceMatrix

router = APIRouter(prefix="/api/conformance", tags=["conformance"])


@router.get("", response_model=ConformanceMatrix,
            summary="Each backend's latest conformance results per mechanism")
def get_conformance(session: SessionDep) -> ConformanceMatrix:
    return conformance_matrix(session)
