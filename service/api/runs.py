"""/api/runs: list, detail, test results, step logs, and triggering a run."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Response, status
from fastapi.responses import StreamingResponse
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.api.auth import TriagerDep
from service.api.deps import AppContext, ContextDep, SessionDep
from service.api.logs import read_log, stream_log
from service.api.params import Cursor, Limit, Offset, RunId, TextFilter
from service.api.triggers import enqueue_committed
from service.commands.audit import audit
from service.commands.runs import create_run, plan_rerun
from service.documents import run_detail, run_list
from service.domain.admission import refusal
from service.domain.torch_spec import SourceKind, TorchSpecError, parse_spec
from service.models import Backend, Run, RunState, StepName
from service.queries import runs as q
from service.queries.torch_builds import NoRecordedTorch, recorded_torch
from service.schemas import (
    Problem,
    RunCreated,
    RunDetail,
    RunList,
    RunRequest,
    TestResultList,
    TestResultOut,
)

router = APIRouter(prefix="/api/runs", tags=["runs"])
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "description": "No such run (or step)"}
}
MAX_LOG_CHUNK = 16 * 1024 * 1024


@router.get("", response_model=RunList, summary="List runs, newest first")
def list_runs(
    session: SessionDep,
    backend: TextFilter = None,
    state: Annotated[RunState | None, Query()] = None,
    torch_spec: TextFilter = None,
    torch_version: TextFilter = None,
    trigger: TextFilter = None,
    limit: Limit = 50,
    offset: Offset = 0,
    cursor: Cursor = None,
) -> RunList:
    filters = q.RunFilters(
        backend=backend,
        state=state.value if state else None,
        torch_spec=torch_spec,
        torch_version=torch_version,
        trigger=trigger,
    )
    return run_list(session, filters, limit=limit, offset=offset, cursor=cursor)


@router.get("/{run_id}", response_model=RunDetail, responses=NOT_FOUND, summary="One run")
def get_run(session: SessionDep, run_id: RunId) -> RunDetail:
    detail = run_detail(session, run_id)
    if detail is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"run {run_id} does not exist")
    return detail


@router.get(
    "/{run_id}/tests", response_model=TestResultList, responses=NOT_FOUND, summary="Test results"
)
def list_tests(
    session: SessionDep,
    run_id: RunId,
    outcome: TextFilter = None,
    suite: TextFilter = None,
    limit: Annotated[int, Query(ge=1, le=5000)] = 500,
    offset: Offset = 0,
) -> TestResultList:
    if session.scalar(select(Run.id).where(Run.id == run_id)) is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"run {run_id} does not exist")
    page = q.list_test_results(
        session, run_id, outcome=outcome, suite=suite, limit=limit, offset=offset
    )
    return TestResultList(
        results=[TestResultOut.model_validate(r) for r in page.results],
        total=page.total,
        limit=limit,
        offset=offset,
    )


@router.get(
    "/{run_id}/steps/{name}/log",
    response_class=Response,
    responses={
        200: {"content": {"text/plain": {}}, "description": "The log bytes requested"},
        **NOT_FOUND,
    },
    summary="A step's log: whole, a byte range, or the last lines",
)
def step_log(
    session: SessionDep,
    ctx: ContextDep,
    run_id: RunId,
    name: StepName,
    tail: Annotated[
        int | None,
        Query(ge=1, le=100_000, description="Last N lines (takes precedence over offset/limit)"),
    ] = None,
    offset: Annotated[int | None, Query(ge=0, le=2**40, description="First byte")] = None,
    limit: Annotated[int | None, Query(ge=1, le=MAX_LOG_CHUNK, description="Max bytes")] = None,
    attempt: Annotated[
        int | None,
        Query(ge=1, le=1_000_000, description="An earlier attempt's log (default: the current attempt)"),
    ] = None,
) -> Response:
    step = q.get_step(session, run_id, name.value, attempt)
    if step is None:
        exists = session.scalar(select(Run.id).where(Run.id == run_id)) is not None
        which = f" in attempt {attempt}" if attempt is not None else " (yet)"
        raise HTTPException(
            status.HTTP_404_NOT_FOUND,
            f"run {run_id} has no {name.value} step{which}"
            if exists
            else f"run {run_id} does not exist",
        )
    if tail is None and offset is None and limit is None:
        # The whole log, streamed a piece at a time (never held whole: issue #33).
        whole = stream_log(step, ctx.engine)
        suffix = f".attempt{attempt}" if attempt is not None else ""
        headers = {
            "X-Log-Offset": "0",
            "X-Log-Size": str(whole.size),
            "X-Log-Complete": "true" if whole.complete else "false",
            "Content-Disposition": f'attachment; filename="run-{run_id}-{name.value}{suffix}.log"',
        }
        if whole.complete:
            headers["Content-Length"] = str(whole.size)
        return StreamingResponse(whole.pieces, media_type="text/plain; charset=utf-8",
                                 headers=headers)
    piece = read_log(step, offset=offset, limit=limit, tail=tail)
    headers = {
        "X-Log-Offset": str(piece.offset),
        "X-Log-Size": str(piece.size),
        "X-Log-Complete": "true" if piece.complete else "false",
    }
    return Response(piece.data, media_type="text/plain; charset=utf-8", headers=headers)


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=RunCreated,
    responses={
        400: {"model": Problem, "description": "The body is not JSON"},
        401: {"model": Problem, "description": "Missing or wrong bearer token"},
        403: {"model": Problem, "description": "The token's role is below triager"},
        404: {"model": Problem, "description": "Unknown backend"},
        422: {
            "model": Problem,
            "description": "The torch spec is not one the operator lets callers ask for, or "
            "names a run with no recorded wheel; a spec that does not parse is a body that "
            "does not validate, its reason in `detail[].msg` (no run is made)",
        },
    },
    summary="Queue a run of a registered backend against a torch spec",
)
def trigger_run(
    session: SessionDep, ctx: ContextDep, body: RunRequest, response: Response, who: TriagerDep
) -> RunCreated:
    backend = session.scalar(select(Backend).where(Backend.name == body.backend))
    if backend is None:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND,
            f"backend {body.backend!r} is not registered (`ootci backend add` or POST /api/backends)",
        )
    _admit(ctx, session, body.torch)
    run = create_run(session, backend, body.torch, trigger="api", trigger_info={"via": "api"})
    session.flush()
    audit(session, who.actor, "run.trigger", f"run:{run.id}",
          {"backend": body.backend, "torch": body.torch})
    session.commit()
    return _accepted(ctx, response, run)


def _admit(ctx: AppContext, session: Session, torch: str) -> None:
    """422 unless ``torch`` parses and is a spec a remote caller may ask for: the token
    lets its holder run builds, not name arbitrary code for the worker to fetch and run."""
    try:
        spec = parse_spec(
            torch,
            nightly_index_url=ctx.settings.nightly_index_url,
            pip_index_url=ctx.settings.pip_index_url,
        )
        if spec.kind == SourceKind.RUN:
            recorded_torch(session, spec.run_id)  # a run: spec must name a recorded wheel
    except (TorchSpecError, NoRecordedTorch) as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    refused = refusal(spec, ctx.settings.caller_policy)
    if refused is not None:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, refused)


def _accepted(ctx: AppContext, response: Response, run: Run) -> RunCreated:
    """Hand a committed run to the dispatcher; answer where to follow it."""
    enqueue_committed(ctx, [run.id])
    url = f"/api/runs/{run.id}"
    response.headers["Location"] = url
    return RunCreated(run_id=run.id, state=run.state, url=url)


@router.post(
    "/{run_id}/rerun",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=RunCreated,
    responses={
        401: {"model": Problem, "description": "Missing or wrong bearer token"},
        403: {"model": Problem, "description": "The token's role is below triager"},
        404: {"model": Problem, "description": "No such run"},
        409: {"model": Problem, "description": "The run is unfinished or passed"},
        422: {"model": Problem, "description": "The run's torch spec is CLI-only"},
    },
    summary="Queue a rerun of a failed run's failed tests (the same pending rerun if asked again)",
)
def rerun_failed(
    session: SessionDep, ctx: ContextDep, run_id: RunId, response: Response, who: TriagerDep
) -> RunCreated:
    run = session.get(Run, run_id)
    if run is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"run {run_id} does not exist")
    _admit(ctx, session, run.torch_spec)  # a CLI run's path: or wheel: is not the API's to repeat
    new_id = plan_rerun(session, run_id)
    if new_id is None:
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            f"run {run_id} is {run.state}: only a failed or errored run can be rerun",
        )
    audit(session, who.actor, "run.rerun", f"run:{run_id}", {"rerun": new_id})
    session.commit()
    return _accepted(ctx, response, session.get_one(Run, new_id))
