"""/api/breakages: list (open first) and detail with history and evidence; triagers' actions
on one: note, link, snooze, dispute, close, reopen (``service/commands/triage_actions.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, status
from sqlalchemy.orm import Session

from service.api.auth import TriagerDep
from service.api.deps import ContextDep, SessionDep
from service.api.params import BreakageId, Limit, Offset, TextFilter
from service.commands import triage_actions as act
from service.config import Settings
from service.documents import bisection_out, breakage_culprits, breakage_triage
from service.models import Breakage, BreakageStatus, utcnow
from service.queries import breakages as q
from service.queries.runs import backend_names
from service.schemas import (
    BreakageDetail,
    BreakageList,
    BreakageSummary,
    Culprits,
    DisputeRequest,
    FailureOut,
    LinkRequest,
    NoteRequest,
    Occurrence,
    Problem,
    ReasonRequest,
    SnoozeRequest,
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
    return breakage_detail(session, b, history)


def breakage_detail(session: Session, b: Breakage, history: int = 100) -> BreakageDetail:
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
        **breakage_triage(b, utcnow()),
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


# --- triage actions ---------------------------------------------------------------------
_ACTION: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem}, 403: {"model": Problem},
    404: {"model": Problem, "description": "No such breakage"},
    422: {"model": Problem, "description": "Bad input: a date not in the future, not a "
          "suspect's PR, already closed, ..."},
}


def run_action(session: Session, do: Callable[[], Breakage]) -> Breakage:
    """One action, one transaction: committed whole, or an error and nothing written."""
    try:
        b = do()
    except act.UnknownBreakage as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    except act.TriageInputError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    session.commit()
    return b


def dispute_action(session: Session, settings: Settings, breakage_id: int, pr: int,
                   reason: str, actor: str) -> Callable[[], Breakage]:
    return lambda: act.dispute(session, breakage_id, pr, reason, actor=actor,
                               repo=settings.upstream_repo, min_score=settings.culprit_min_score)


@router.post("/{breakage_id}/note", response_model=BreakageDetail, responses=_ACTION,
             summary="Set (or, empty, clear) the breakage's note")
def note(session: SessionDep, breakage_id: BreakageId, body: NoteRequest,
         who: TriagerDep) -> BreakageDetail:
    b = run_action(session, lambda: act.set_note(session, breakage_id, body.note,
                                                 actor=who.actor))
    return breakage_detail(session, b)


@router.post("/{breakage_id}/link", response_model=BreakageDetail, responses=_ACTION,
             summary="Link the breakage to a bug")
def link(session: SessionDep, breakage_id: BreakageId, body: LinkRequest,
         who: TriagerDep) -> BreakageDetail:
    b = run_action(session, lambda: act.add_link(session, breakage_id, body.url,
                                                 actor=who.actor))
    return breakage_detail(session, b)


@router.post("/{breakage_id}/snooze", response_model=BreakageDetail, responses=_ACTION,
             summary="Known issue: mute it until a date or a newer torch (no label, comment "
             "or notification meanwhile)")
def snooze(session: SessionDep, breakage_id: BreakageId, body: SnoozeRequest,
           who: TriagerDep) -> BreakageDetail:
    b = run_action(session, lambda: act.snooze(session, breakage_id, until=body.until,
                                               torch=body.torch, reason=body.reason,
                                               actor=who.actor))
    return breakage_detail(session, b)


@router.post("/{breakage_id}/dispute", response_model=BreakageDetail, responses=_ACTION,
             summary="Not this PR: the suspect is passed over for this breakage, its label "
             "removed and its comment edited")
def dispute(session: SessionDep, ctx: ContextDep, breakage_id: BreakageId,
            body: DisputeRequest, who: TriagerDep) -> BreakageDetail:
    b = run_action(session, dispute_action(session, ctx.settings, breakage_id, body.pr,
                                           body.reason, who.actor))
    return breakage_detail(session, b)


@router.post("/{breakage_id}/close", response_model=BreakageDetail, responses=_ACTION,
             summary="Close it by hand (it reopens if it recurs)")
def close(session: SessionDep, breakage_id: BreakageId, body: ReasonRequest,
          who: TriagerDep) -> BreakageDetail:
    b = run_action(session, lambda: act.close(session, breakage_id, body.reason,
                                              actor=who.actor))
    return breakage_detail(session, b)


@router.post("/{breakage_id}/reopen", response_model=BreakageDetail, responses=_ACTION,
             summary="Reopen a closed or resolved breakage")
def reopen(session: SessionDep, breakage_id: BreakageId, body: ReasonRequest,
           who: TriagerDep) -> BreakageDetail:
    b = run_action(session, lambda: act.reopen(session, breakage_id, body.reason,
                                               actor=who.actor))
    return breakage_detail(session, b)
