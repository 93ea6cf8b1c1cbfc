"""The wire shape: every document ootci hands out, the JSON API's bodies (its OpenAPI schema)
and every ``ootci ... --json``. ``ootci show RUN --json`` prints what ``GET /api/runs/RUN``
answers and ``ootci runs --json`` what ``GET /api/runs`` answers: both build them here.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session

from service.models import Breakage, OutboxMessage, Run, Step
from service.queries import conformance as conformance_queries
from service.queries import runs as run_queries
from service.queries.breakages import Occurrence
from service.queries.matrix import MatrixCell
from service.queries.outbox import messages_for
from service.queries.pin_reports import reports as pin_report_rows

# Counting stops here (like search engines' "10,000+"): past it the total is a lower bound.
TOTAL_CAP = 10_000

# The kinds the pipeline provisions; the pipeline validates the rest of the spec.
# ASCII whitespace spelled out: "\s" means different sets in JSON Schema (ECMA), Python and
# pydantic's Rust regex, and the schema must accept exactly what the server accepts.
TORCH_SPEC_PATTERN = r"^(installed|nightly|(pip|wheel|path):[^\x00\t\n\r ][^\x00]*)$"


class _Orm(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class TorchBuildOut(_Orm):
    id: int
    spec: str
    source_kind: str
    version: str
    git_version: str


class RunSummary(_Orm):
    id: int
    backend: str
    torch_spec: str
    torch_build: TorchBuildOut | None
    backend_sha: str | None
    state: str
    trigger: str
    trigger_info: dict[str, Any]
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    attempts: int
    verdict: str | None = Field(
        description="compatible for a passed run; else who is to blame: upstream | backend | "
        "unknown | infra | flake (the worst of its failures); null until it has finished"
    )
    verdict_subtype: str | None
    duration_s: float | None


class RunList(BaseModel):
    runs: list[RunSummary]
    total: int = Field(description="Runs matching the filters, over all pages (see total_capped)")
    total_capped: bool = Field(
        description="True when counting stopped at 10,000: there are at least `total` runs"
    )
    limit: int
    offset: int
    next_cursor: int | None = Field(
        description="Pass as `cursor` for the next page; null at the end"
    )


class StepOut(_Orm):
    id: int
    name: str
    status: str
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    duration_s: float | None
    exit_code: int | None
    log_size: int | None
    summary: str | None
    log_url: str
    attempt: int = Field(1, description="The attempt of the run that ran this step")


class AttemptOut(BaseModel):
    """One attempt of a run: a retry after an infrastructure failure, or a start-over after
    its process died, is a new attempt; earlier attempts keep their steps and logs."""

    attempt: int
    current: bool = Field(description="The attempt `steps` and `failures` belong to")
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    outcome: str = Field(
        description="The run's state for the current attempt; for an earlier one errored | "
        "failed (its last step) or lost (its process died mid-step)"
    )
    reason: str | None = Field(description="Why it ended (e.g. the infra error it was retried for)")
    steps: list[StepOut]


class FailureOut(_Orm):
    id: int
    step_name: str
    stage: str
    nodeid: str | None
    line: str
    line_no: int | None
    captures: dict[str, Any]
    category: str | None = Field(
        validation_alias="verdict",  # Failure.verdict: its triage
        description="Who is to blame: triage's verdict on the failure (the same as `triage`); "
        "what the rule suggests is `rule_category`",
    )
    subtype: str | None
    rule: str | None
    fingerprint: str | None
    finding: dict[str, Any] = Field(description="The classifier's full finding (evidence)")
    triage: str | None
    triage_reason: str | None
    breakage_id: int | None
    rule_category: str | None = Field(
        None, description="What the classifier's rule suggests: never the verdict")
    needs_isolation: bool = Field(
        False, description="Triage could not tell torch from the backend: an isolating run "
        "would decide (the category is then unknown)")
    isolate_against_run_id: int | None = Field(
        None, description="The run whose torch that isolating run would use (where the "
        "failure last passed); null when it never passed")


class MechanismOut(BaseModel):
    level: str = Field(description="required | recommended | optional")
    passed: int
    failed: int
    skipped: int
    failing: list[str] = Field(description="Node ids of the mechanism's failing tests")


class ConformanceOut(BaseModel):
    device: str
    mechanisms: dict[str, MechanismOut]


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


class BackendConformanceOut(ConformanceOut):
    backend: str
    run_id: int = Field(description="The backend's latest run with conformance results")
    torch_version: str | None


class ConformanceMatrix(BaseModel):
    backends: list[BackendConformanceOut]


def conformance_matrix(session: Session) -> ConformanceMatrix:
    """Each backend's latest conformance results: the dashboard's conformance matrix."""
    out = []
    for b in conformance_queries.latest_per_backend(session):
        shaped = conformance_of(session, b.run_id)
        assert shaped is not None  # the run was picked for having results
        out.append(BackendConformanceOut(backend=b.backend, run_id=b.run_id,
                                         torch_version=b.torch_version, **shaped.model_dump()))
    return ConformanceMatrix(backends=out)


class RunDetail(RunSummary):
    claimed_by: str | None
    lease_expires_at: dt.datetime | None
    retry_at: dt.datetime | None = Field(
        description="Queued again after an infrastructure failure: not retried before this"
    )
    error: str | None
    verdict_reason: str | None
    steps: list[StepOut]
    failures: list[FailureOut]
    test_counts: dict[str, int]
    attempt_history: list[AttemptOut] = Field(
        [], description="Every attempt that ran a step, oldest first (the last is the current "
        "one); `attempts` above is their count"
    )
    conformance: ConformanceOut | None = Field(
        default=None,
        description="The conformance suite's results per mechanism; null when the backend's "
        "recipe has no [conformance] table (or the suite has not run yet)",
    )


class TestResultOut(_Orm):
    __test__ = False

    id: int
    nodeid: str
    suite: str
    outcome: str
    duration_s: float | None
    message: str | None
    details: str | None


class TestResultList(BaseModel):
    __test__ = False

    results: list[TestResultOut]
    total: int
    limit: int
    offset: int


class Matrix(BaseModel):
    backends: list[str]
    cells: list[MatrixCell]


class BreakageSummary(_Orm):
    id: int
    backend: str
    fingerprint: str
    category: str | None
    subtype: str | None
    title: str
    status: str
    first_seen_run_id: int | None
    last_seen_run_id: int | None
    first_seen_at: dt.datetime
    last_seen_at: dt.datetime
    occurrences: int
    resolved_at: dt.datetime | None
    culprits: list[Any]


class BreakageList(BaseModel):
    breakages: list[BreakageSummary]
    total: int
    limit: int
    offset: int


class BreakageDetail(BreakageSummary):
    captures: dict[str, Any]
    note: str | None
    resolved_by_run_id: int | None
    evidence: FailureOut | None = Field(description="The failure of its first occurrence")
    history: list[Occurrence] = Field(description="Failures grouped by run, newest first")


class RangeOut(BaseModel):
    """A regression range: the torch of the last green run (base) and of the red one (head)."""

    base: str | None = Field(description="git_version of the base torch; null: no range")
    head: str | None
    base_version: str | None
    head_version: str | None
    base_run_id: int | None
    note: str | None = Field(description="Why there is no usable range; null when there is one")
    compare_url: str | None


class SuspectOut(BaseModel):
    sha: str
    pr: int | None
    title: str
    score: float = Field(ge=0, le=1)
    reasons: list[str]


class ReportOut(_Orm):
    """One message of the outbox: what was (or would be) sent to GitHub, and how it went."""

    id: int
    kind: str
    target: str
    state: str = Field(description="pending | sent | dry-run | failed | superseded")
    attempts: int
    last_error: str | None
    created_at: dt.datetime
    sent_at: dt.datetime | None
    url: str | None = Field(None, description="The comment GitHub answered with, when posted")


class Culprits(BaseModel):
    """The suspects of a breakage (or of a run, from `ootci culprit`), best first."""

    range: RangeOut
    suspects: list[SuspectOut]
    note: str | None = Field(description="Why there is no suspect, when there is none")
    reports: list[ReportOut] = []


class RunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backend: str = Field(min_length=1, max_length=100, pattern=r"^[^\x00]+$")
    torch: str = Field(
        min_length=1,
        max_length=1000,
        pattern=TORCH_SPEC_PATTERN,
        description="Torch spec: installed, nightly, pip:REQUIREMENT, wheel:PATH|URL, path:DIR",
        examples=["installed", "pip:torch==2.13.0", "nightly"],
    )


class RunCreated(BaseModel):
    run_id: int
    state: str
    url: str


class WebhookResult(BaseModel):
    status: str = Field(description="queued | recorded | ignored | duplicate")
    delivery: str
    reason: str | None = None
    run_ids: list[int] = []


class Health(BaseModel):
    status: str = Field(description="ok | unavailable")
    checks: dict[str, str] = Field(description="Each dependency: ok, or why it is not")


class Problem(BaseModel):
    detail: str


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


def compare_url(repo: str, base: str | None, head: str | None) -> str | None:
    return f"https://github.com/{repo}/compare/{base}...{head}" if base and head else None


def report_out(message: OutboxMessage) -> ReportOut:
    out = ReportOut.model_validate(message)
    out.url = message.result.get("comment_url") if message.result else None
    return out


def breakage_culprits(session: Session, breakage: Breakage, repo: str) -> Culprits:
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
        suspects=[SuspectOut.model_validate(c) for c in breakage.culprits],
        note=breakage.culprits_note,
        reports=[report_out(m) for m in messages_for(session, breakage, repo)],
    )


class PinReportOut(BaseModel):
    """One stored weekly pin report (``GET /api/pins/reports``, ``ootci pins report --json``)."""

    backend: str
    week: dt.date
    generated_at: dt.datetime
    current_pin: str | None
    current_version: str | None
    green_spec: str | None = Field(description="The newest build passed on, as a reproducible spec")
    green_version: str | None
    green_git_version: str | None
    green_run_id: int | None
    action: str = Field(description="bump | hold")
    proposed_spec: str | None
    reason: str
    breakages: list[dict[str, Any]]
    bump_pr: dict[str, Any]


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


class BackendChangeOut(_Orm):
    changed_at: dt.datetime
    changed_by: str
    change: str
    source_before: str | None
    source_after: str


class BackendOut(BaseModel):
    name: str
    source: str = Field(description="A git URL, or a directory on the workers")
    ref: str | None
    subdir: str | None
    last_built_sha: str | None = Field(description="The backend sha of its newest run")
    changes: list[BackendChangeOut]


class BackendRequest(BaseModel):
    """Register a backend from a git repository (a directory is registered with the CLI)."""

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")
    git: str = Field(min_length=1, max_length=1000)
    ref: str | None = Field(default=None, max_length=200)
    subdir: str | None = Field(default=None, max_length=300, pattern=r"^[^/\x00][^\x00]*$")
    re_register: bool = False


def backend_out(session: Session, name: str) -> BackendOut | None:
    from service.queries.backends import backend_changes, last_built_sha, registered_backend

    backend = registered_backend(session, name)
    if backend is None:
        return None
    return BackendOut(
        name=backend.name, source=backend.source, ref=backend.ref, subdir=backend.subdir,
        last_built_sha=last_built_sha(session, backend.id),
        changes=[BackendChangeOut.model_validate(c) for c in backend_changes(session, backend.id)],
    )


def backend_list(session: Session) -> list[BackendOut]:
    from service.queries.backends import registered_backends

    return [b for b in (backend_out(session, r.name) for r in registered_backends(session)) if b]
