"""The documents ootci hands out, assembled from rows: what the JSON API answers and what
every ``ootci ... --json`` prints, both built here so they cannot drift apart
(``ootci show RUN --json`` is ``GET /api/runs/RUN``, ``ootci runs --json`` is
``GET /api/runs``). Their shape is ``service/schemas.py``; the rows come through
``service/queries/``. Nothing here writes.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy.orm import Session

from service.domain.triage_actions import disputed_prs, is_snoozed
from service.models import Breakage, OutboxMessage, Run, Step
from service.queries import bisections as bisection_queries
from service.queries import conformance as conformance_queries
from service.queries import runs as run_queries
from service.queries.backends import (
    backend_changes,
    last_built_sha,
    registered_backend,
    registered_backends,
)
from service.queries.outbox import messages_for
from service.queries.pin_reports import reports as pin_report_rows
from service.schemas import (
    AttemptOut,
    BackendChangeOut,
    BackendConformanceOut,
    BackendOut,
    BisectionOut,
    ClosedOut,
    ConformanceMatrix,
    ConformanceOut,
    Culprits,
    DisputeOut,
    FailureOut,
    LinkOut,
    MechanismOut,
    NarrowedOut,
    PinReportOut,
    ProbeOut,
    RangeOut,
    ReportOut,
    RunDetail,
    RunList,
    RunSummary,
    SnoozeOut,
    StepOut,
    SuspectOut,
    TorchBuildOut,
)
from service.sources import without_userinfo

# Counting stops here (like search engines' "10,000+"): past it the total is a lower bound.
TOTAL_CAP = 10_000


# ---------------------------------------------------------------------------- conformance
def conformance_of(session: Session, run_id: int) -> ConformanceOut | None:
    rows = conformance_queries.results_for_run(session, run_id)
    if not rows:
        return None
    return ConformanceOut(
        device=rows[0].device,
        mechanisms={
            r.mechanism: MechanismOut(level=r.level, passed=r.passed, failed=r.failed,
                                      skipped=r.skipped, failing=list(r.failing or []))
            for r in rows
        },
    )


def conformance_matrix(session: Session) -> ConformanceMatrix:
    """Each backend's latest conformance results: the dashboard's conformance matrix."""
    out = []
    for b in conformance_queries.latest_per_backend(session):
        shaped = conformance_of(session, b.run_id)
        assert shaped is not None  # the run was picked for having results
        out.append(BackendConformanceOut(backend=b.backend, run_id=b.run_id,
                                         torch_version=b.torch_version, **shaped.model_dump()))
    return ConformanceMatrix(backends=out)


# ---------------------------------------------------------------------------- run documents
def run_summary(run: Run, backend: str) -> RunSummary:
    return RunSummary(
        id=run.id,
        backend=backend,
        torch_spec=run.torch_spec,
        torch_build=TorchBuildOut.model_validate(run.torch_build) if run.torch_build else None,
        backend_sha=run.backend_sha,
        state=run.state,
        trigger=run.trigger,
        trigger_info=run.trigger_info,
        created_at=run.created_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
        attempts=run.attempts,
        sandboxed=run.sandboxed,
        verdict=run.verdict,
        verdict_subtype=run.verdict_subtype,
        duration_s=run.duration_s,
    )


def run_detail(session: Session, run_id: int) -> RunDetail | None:
    """One run with its steps, failures and test counts; None if there is no such run."""
    run = run_queries.get_run(session, run_id)
    if run is None:
        return None
    backend = run_queries.get_backend(session, run.backend_id)
    base = run_summary(run, backend.name if backend else "")
    return RunDetail(
        **base.model_dump(),
        claimed_by=run.claimed_by,
        lease_expires_at=run.lease_expires_at,
        retry_at=run.retry_at,
        error=run.error,
        verdict_reason=run.verdict_reason,
        steps=[step_out(run.id, s, current=True) for s in run.steps],
        failures=[FailureOut.model_validate(f) for f in run.failures],
        test_counts=run_queries.outcome_counts(session, run.id),
        conformance=conformance_of(session, run.id),
        attempt_history=[
            AttemptOut(
                attempt=a.number,
                current=a.current,
                started_at=a.started_at,
                finished_at=a.finished_at,
                outcome=a.outcome,
                reason=a.reason,
                steps=[step_out(run.id, s, current=a.current) for s in a.steps],
            )
            for a in run_queries.attempt_history(run)
        ],
    )


def step_out(run_id: int, step: Step, *, current: bool) -> StepOut:
    """A step; an earlier attempt's log is asked for with its attempt number."""
    url = f"/api/runs/{run_id}/steps/{step.name}/log"
    return StepOut(
        id=step.id,
        name=step.name,
        status=step.status,
        started_at=step.started_at,
        finished_at=step.finished_at,
        duration_s=step.duration_s,
        exit_code=step.exit_code,
        log_size=step.log_size,
        summary=step.summary,
        log_url=url if current else f"{url}?attempt={step.attempt}",
        attempt=step.attempt,
    )


def run_list(
    session: Session,
    filters: run_queries.RunFilters,
    *,
    limit: int,
    offset: int = 0,
    cursor: int | None = None,
) -> RunList:
    """A page of runs, newest first (``cursor``: the previous page's ``next_cursor``)."""
    page = run_queries.list_runs(
        session, filters, limit=limit, offset=offset, before_id=cursor, count_cap=TOTAL_CAP
    )
    return RunList(
        runs=[run_summary(r, page.backend_names.get(r.backend_id, "")) for r in page.runs],
        total=page.total,
        total_capped=page.total_capped,
        limit=limit,
        offset=offset,
        next_cursor=page.next_cursor,
    )


# ---------------------------------------------------------------------------- culprits
def compare_url(repo: str, base: str | None, head: str | None) -> str | None:
    return f"https://github.com/{repo}/compare/{base}...{head}" if base and head else None


def report_out(message: OutboxMessage) -> ReportOut:
    out = ReportOut.model_validate(message)
    out.url = message.result.get("comment_url") if message.result else None
    return out


def breakage_culprits(session: Session, breakage: Breakage, repo: str) -> Culprits:
    disputed = disputed_prs(breakage.disputes)
    return Culprits(
        range=RangeOut(
            base=breakage.range_base_sha,
            head=breakage.range_head_sha,
            base_version=breakage.range_base_version,
            head_version=breakage.range_head_version,
            base_run_id=breakage.range_base_run_id,
            note=breakage.range_note,
            compare_url=compare_url(repo, breakage.range_base_sha, breakage.range_head_sha),
        ),
        suspects=[SuspectOut.model_validate(
            {**c, "disputed": c.get("pr") is not None and int(c["pr"]) in disputed})
            for c in breakage.culprits],
        note=breakage.culprits_note,
        reports=[report_out(m) for m in messages_for(session, breakage, repo)],
    )


# ---------------------------------------------------------------------------- pin reports
def pin_report_list(session: Session, *, weeks: int = 4, backend: str | None = None) -> list[PinReportOut]:
    return [
        PinReportOut(
            backend=name, week=r.week, generated_at=r.generated_at, current_pin=r.current_pin,
            current_version=r.current_version, green_spec=r.green_spec,
            green_version=r.green_version, green_git_version=r.green_git_version,
            green_run_id=r.green_run_id, action=r.action, proposed_spec=r.proposed_spec,
            reason=r.reason, breakages=list(r.breakages or []), bump_pr=dict(r.bump_pr or {}),
        )
        for r, name in pin_report_rows(session, weeks=weeks, backend=backend)
    ]


# --- the backend registry (`ootci backend ...`, /api/backends) ---------------------------
def backend_out(session: Session, name: str) -> BackendOut | None:
    backend = registered_backend(session, name)
    if backend is None:
        return None
    return BackendOut(
        name=backend.name, source=without_userinfo(backend.source), ref=backend.ref,
        subdir=backend.subdir, last_built_sha=last_built_sha(session, backend.id),
        changes=[_change_out(c) for c in backend_changes(session, backend.id)],
    )


def _change_out(change: Any) -> BackendChangeOut:
    """A registration as served: a source written before URLs were checked for
    credentials (or by hand) is shown without them."""
    out = BackendChangeOut.model_validate(change)
    return out.model_copy(update={
        "source_before": without_userinfo(out.source_before) if out.source_before else None,
        "source_after": without_userinfo(out.source_after),
    })


def backend_list(session: Session) -> list[BackendOut]:
    return [b for b in (backend_out(session, r.name) for r in registered_backends(session)) if b]


# --- nightly bisection (the breakage's "bisection", `ootci bisect`) ----------------------
def bisection_out(session: Session, breakage_id: int) -> BisectionOut | None:
    view = bisection_queries.for_breakage(session, breakage_id)
    if view is None:
        return None
    b = view.bisection
    narrowed = None
    if view.good and view.bad:
        narrowed = NarrowedOut(good=view.good[0], bad=view.bad[0], good_sha=view.good[1] or None,
                               bad_sha=view.bad[1] or None, good_run_id=b.good_run_id,
                               bad_run_id=b.bad_run_id)
    return BisectionOut(
        state=b.state, base_version=b.base_version, head_version=b.head_version,
        probes=[ProbeOut(spec=p.probe.spec, night=p.probe.night, run_id=p.probe.run_id,
                         run_state=p.run_state, torch_version=p.torch_version,
                         result=p.probe.result, note=p.probe.note) for p in view.probes],
        narrowed_to=narrowed, note=b.note,
    )


# --- triage by people (service/commands/triage_actions.py) -------------------------------
def breakage_triage(b: Breakage, now: dt.datetime) -> dict[str, Any]:
    """The triage fields of a breakage's document: note links, snooze, disputes, close."""
    snoozed = b.snoozed_until is not None or bool(b.snoozed_until_torch)
    return {
        "links": [LinkOut.model_validate(link) for link in b.links or []],
        "snooze": SnoozeOut(until=b.snoozed_until, torch=b.snoozed_until_torch,
                            by=b.snoozed_by, reason=b.snooze_reason,
                            active=is_snoozed(b.snoozed_until, b.snoozed_until_torch, now))
        if snoozed else None,
        "disputes": [DisputeOut.model_validate(d) for d in b.disputes or []],
        "closed": ClosedOut(at=b.closed_at, by=b.closed_by, reason=b.close_reason)
        if b.closed_at else None,
    }
