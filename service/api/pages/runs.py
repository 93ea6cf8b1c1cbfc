"""A run: its target, steps, failures grouped by breakage with their evidence, the paged
logs, and a small JSON status the page polls while the run is running."""

from __future__ import annotations

from collections import OrderedDict
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from sqlalchemy import select
from starlette.responses import HTMLResponse, JSONResponse

from service.api.deps import ContextDep, SessionDep
from service.api.logs import LogStream, line_count, read_last_page, read_page, stream_log
from service.api.pages.logview import (
    LAST_PAGE,
    LINES_PER_PAGE,
    LogPage,
    last_page,
    page_from,
    page_of_line,
    paginate_pieces,
)
from service.api.params import RunId
from service.api.templates import render
from service.models import Breakage, Failure, Outcome, RunState, Step
from service.queries import runs as run_queries
from service.queries import stages

router = APIRouter()

FAILURES_PER_GROUP = 25
FAILED_TESTS_SHOWN = 200
StepName = Annotated[str, Path(pattern=r"^[a-z_]{1,16}$")]


def _not_found(request: Request, what: str) -> HTMLResponse:
    return render(request, "not_found.html", {"page_title": "Not found", "what": what}, 404)


def group_failures(
    failures: list[Failure], breakages: dict[int, Breakage]
) -> list[tuple[Breakage | None, list[Failure]]]:
    """Failures grouped by their breakage (in first-failure order); unattached ones last."""
    groups: OrderedDict[int | None, list[Failure]] = OrderedDict()
    for failure in failures:
        groups.setdefault(failure.breakage_id, []).append(failure)
    if None in groups:
        groups.move_to_end(None)
    return [(breakages.get(bid) if bid is not None else None, fs) for bid, fs in groups.items()]


def evidence(failure: Failure) -> dict[str, Any]:
    """The decisive line with its context, numbered, from the classifier's Finding.

    A failed test is classified from its JUnit report (message and traceback), so its line
    numbers count lines of that report; only a failure without a test (a build, an import,
    a runner that died) points into the step's log, and only then is there a log line to
    link to."""
    finding = failure.finding or {}
    before = [str(x) for x in finding.get("context_before", [])]
    after = [str(x) for x in finding.get("context_after", [])]
    line_no = failure.line_no or finding.get("line_number") or 0
    line = failure.line or str(finding.get("line", ""))
    lines: list[tuple[int | None, str, bool]] = []
    first = line_no - len(before) if line_no else None
    for i, text in enumerate(before):
        lines.append((first + i if first else None, text, False))
    lines.append((line_no or None, line, True))
    for i, text in enumerate(after):
        lines.append((line_no + 1 + i if line_no else None, text, False))
    return {
        "lines": lines,
        "line_no": line_no,
        "source": "report" if failure.nodeid else "log",
        "log_page": page_of_line(line_no) if line_no and not failure.nodeid else None,
        "explanation": finding.get("explanation") or "",
        "rule": failure.rule or finding.get("rule"),
    }


@router.get("/runs/{run_id}", response_class=HTMLResponse, name="dash_run")
def run_page(
    request: Request, session: SessionDep, ctx: ContextDep, run_id: RunId
) -> HTMLResponse:
    run = run_queries.get_run(session, run_id)
    if run is None:
        return _not_found(request, f"run {run_id}")
    backend = run_queries.get_backend(session, run.backend_id)
    breakage_ids = {f.breakage_id for f in run.failures if f.breakage_id is not None}
    breakages = (
        {b.id: b for b in session.scalars(select(Breakage).where(Breakage.id.in_(breakage_ids)))}
        if breakage_ids else {}
    )
    # Quarantined tests' failures are shown apart: they did not count for the verdict.
    groups = group_failures([f for f in run.failures if not f.quarantined], breakages)
    counts = run_queries.outcome_counts(session, run.id)
    return render(request, "run.html", {
        "page_title": f"Run {run.id}",
        "run": run,
        "backend": backend,
        "build": run.torch_build,
        "finished": RunState(run.state).finished,
        "groups": [
            (b, [(f, evidence(f)) for f in fs[:FAILURES_PER_GROUP]], len(fs))
            for b, fs in groups
        ],
        "quarantined": [(f, evidence(f)) for f in run.failures if f.quarantined],
        "counts": counts,
        "github_repo": ctx.settings.upstream_repo,
        "failed_tests": stages.failed_results(session, run.id, limit=FAILED_TESTS_SHOWN),
        "failed_total": sum(counts.get(o, 0) for o in Outcome.FAILING),
        "earlier_attempts": [a for a in run_queries.attempt_history(run) if not a.current],
    })


@router.get("/runs/{run_id}/status.json", name="dash_run_status")
def run_status(session: SessionDep, run_id: RunId) -> JSONResponse:
    """What the live run page polls: cheap (no logs, no results) and never cached."""
    run = run_queries.get_run(session, run_id)
    if run is None:
        return JSONResponse({"detail": f"run {run_id} not found"}, status_code=404)
    body = {
        "id": run.id,
        "state": run.state,
        "finished": RunState(run.state).finished,
        "verdict": run.verdict,
        "verdict_subtype": run.verdict_subtype,
        "steps": [
            {"name": s.name, "status": s.status, "duration_s": s.duration_s}
            for s in run.steps
        ],
    }
    return JSONResponse(body, headers={"Cache-Control": "no-store"})


@router.get("/runs/{run_id}/steps/{name}/log", response_class=HTMLResponse, name="dash_step_log")
def step_log(
    request: Request,
    session: SessionDep,
    run_id: RunId,
    name: StepName,
    page: Annotated[int | None, Query(ge=1, le=1_000_000)] = None,
    hl: Annotated[int | None, Query(ge=1, le=100_000_000)] = None,
) -> HTMLResponse:
    step = run_queries.get_step(session, run_id, name)
    if step is None:
        return _not_found(request, f"step {name!r} of run {run_id}")
    # Read through piece by piece: only the page shown is held (issue #33: eight views
    # of a 200 MB log must not hold eight copies of it).
    log = stream_log(step)
    if page is None:
        # A step still writing its log opens at its end, where the new lines arrive.
        page = page_of_line(hl) if hl else (1 if log.complete else LAST_PAGE)
    view = _last_page(step, page) or _seeked_page(step, page) or paginate_pieces(log.pieces, page)
    return render(request, "log.html", {
        "page_title": f"Run {run_id} · {name} log",
        "run_id": run_id,
        "step": step,
        "view": view,
        "hl": hl,
        "follow": _follow(run_id, name, log, view),
    })


def _last_page(step: Step, page: int) -> LogPage | None:
    """The last page read from the log's end (issue #33: where a running log opens, it
    must not read the whole log); None for any other page or an uncounted log."""
    if page != LAST_PAGE:
        total = line_count(step)
        if total is None or page < page_of_line(total):
            return None
    read = read_last_page(step, LINES_PER_PAGE)
    if read is None:
        return None
    tail, total = read
    return last_page(tail.data, total, tail.size)


def _seeked_page(step: Step, page: int) -> LogPage | None:
    """Any other page read from the nearest point before it, never from the log's start
    (issue #33: memory and time in proportion to the page, not to where it is); None for
    an uncounted log."""
    if page == LAST_PAGE:
        return None  # past the end of an uncounted log: only a read through finds it
    read = read_page(step, (page - 1) * LINES_PER_PAGE + 1)
    if read is None:
        return None
    return page_from(read.pieces, read.skip, page, read.total, read.size)


def _follow(run_id: int, name: str, log: LogStream, view: LogPage) -> dict[str, Any] | None:
    """Where log-live.js picks up a log the step is still writing: the bytes after those
    read, and whether the last line shown is still unfinished. Only on the last page."""
    if log.complete or view.page != view.pages:
        return None
    return {
        "url": f"/api/runs/{run_id}/steps/{name}/log",
        "offset": view.size,
        "last_line": view.first_line + len(view.lines) - 1,
        "partial": view.partial,
    }
