"""/api/breakages: list (open first) and detail with history and evidence."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status

from service.api.deps import ContextDep, SessionDep
from service.api.params import BreakageId, Limit, Offset, TextFilter
from service.documents import bisection_out, breakage_culprits
from service.models import Breakage, BreakageStatus
from service.queries import breakages as q
from service.queries.runs import backend_names
from service.schemas import (
    BreakageDetail,
    BreakageList,
    BreakageSummary,
    Culprits,
    FailureOut,
    Occurrence,
    Problem,
)

router = APIRouter(prefix="/api/breakages", tags=["breakages"])


def _summary(b: Breakage, backend: str) -> BreakageSummary:
    return BreakageSummary(
        id=b.id,
        backend=backend,
        fingerprint=b.fingerprint,
        category=b.category,
        subtype=b.subtype,
        title=b.title,
        status=b.status,
        first_seen_run_id=b.first_seen_run_id,
        last_seen_run_id=b.last_seen_run_id,
        first_seen_at=b.first_seen_at,
        last_seen_at=b.last_seen_at,
        occurrences=b.occurrences,
        resolved_at=b.resolved_at,
        culprits=b.culprits,
    )


@router.get("", response_model=BreakageList, summary="Breakages, open first")
def list_breakages(
    session: SessionDep,
    status_: Annotated[BreakageStatus | None, Query(alias="status")] = None,
    backend: TextFilter = None,
    category: TextFilter = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> BreakageList:
    page = q.list_breakages(
        session,
        q.BreakageFilters(
            status=status_.value if status_ else None, backend=backend, category=category
        ),
        limit=limit,
        offset=offset,
    )
    return BreakageList(
        breakages=[_summary(b, page.backend_names.get(b.backend_id, "")) for b in page.breakages],
        total=page.total,
        limit=limit,
        offset=offset,
    )


@router.get(
    "/{breakage_id}",
    response_model=BreakageDetail,
    responses={404: {"model": Problem, "description": "No such breakage"}},
    summary="One breakage: history across runs and the evidence of its first occurrence",
)
def get_breakage(
    session: SessionDep,
    breakage_id: BreakageId,
    history: Annotated[int, Query(ge=1, le=1000, description="Newest N runs")] = 100,
) -> BreakageDetail:
    b = q.get_breakage(session, breakage_id)
    if b is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"breakage {breakage_id} does not exist")
    evidence = q.first_evidence(session, b.id)
    name = backend_names(session, {b.backend_id}).get(b.backend_id, "")
    return BreakageDetail(
        **_summary(b, name).model_dump(),
        captures=b.captures,
        note=b.note,
        resolved_by_run_id=b.resolved_by_run_id,
        evidence=FailureOut.model_validate(evidence) if evidence else None,
        history=[
            Occurrence.model_validate(o) for o in q.occurrences(session, b.id, limit=history)
        ],
        bisection=bisection_out(session, b.id),
    )


@router.get(
    "/{breakage_id}/culprits",
    response_model=Culprits,
    responses={404: {"model": Problem, "description": "No such breakage"}},
    summary="The regression range, the ranked suspects with their reasons, and what was "
    "posted to GitHub",
)
def get_culprits(session: SessionDep, ctx: ContextDep, breakage_id: BreakageId) -> Culprits:
    b = q.get_breakage(session, breakage_id)
    if b is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"breakage {breakage_id} does not exist")
    return breakage_culprits(session, b, ctx.settings.upstream_repo)
