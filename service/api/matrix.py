"""/api/matrix: the latest verdict per backend x torch target."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from service.api.deps import SessionDep
from service.api.params import TextFilter
from service.queries import matrix as q
from service.schemas import Matrix, MatrixCell

router = APIRouter(prefix="/api/matrix", tags=["matrix"])


@router.get("", response_model=Matrix, summary="Latest verdict per backend x torch target")
def get_matrix(
    session: SessionDep,
    backend: TextFilter = None,
    targets: Annotated[int, Query(ge=1, le=365, description="Newest N torch targets")] = 30,
) -> Matrix:
    cells = q.matrix(session, limit_targets=targets, backend=backend)
    return Matrix(
        backends=sorted({c.backend for c in cells}),
        cells=[MatrixCell.model_validate(c) for c in cells],
    )
