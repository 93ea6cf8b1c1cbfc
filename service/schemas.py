"""The wire shape: every document ootci hands out, the JSON API's bodies (its OpenAPI schema)
and every ``ootci ... --json``. Models only: ``service/documents.py`` fills them from the
database, for the API and the CLI alike, so ``ootci show RUN --json`` prints what
``GET /api/runs/RUN`` answers and ``ootci runs --json`` what ``GET /api/runs`` answers.
Nothing here reads the database (a contract in ``pyproject.toml``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from service.domain.torch_spec import SPEC_FORMS, TorchSpecError, parse_spec


class _Orm(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class TorchBuildOut(_Orm):
    id: int
    spec: str
    source_kind: str
    version: str
    git_version: str
    artifact_url: str | None = Field(
        None, description="The wheel (index URL or local file) the torch was installed from; "
        "null for installed: and path: specs")


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
    sandboxed: bool | None = Field(
        None, description="false: the operator ran it with the sandbox off (--no-sandbox / "
        "OOTCI_SANDBOX=off), its code ran with the worker's rights; null: not started yet, or "
        "run before ootci recorded it",
    )
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


class ConsequenceOut(BaseModel):
    nodeid: str | None
    message: str | None = None


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
    consequences: list[ConsequenceOut] = Field(
        default_factory=list, description="Later failures of the step that only repeat this "
        "one's cause (the test modules a half-imported torch fails after the first import "
        "error), folded into it: they have no failure or breakage of their own")


class MechanismOut(BaseModel):
    level: str = Field(description="required | recommended | optional")
    passed: int
    failed: int
    skipped: int
    failing: list[str] = Field(description="Node ids of the mechanism's failing tests")


class ConformanceOut(BaseModel):
    device: str
    mechanisms: dict[str, MechanismOut]


class BackendConformanceOut(ConformanceOut):
    backend: str
    run_id: int = Field(description="The backend's latest run with conformance results")
    torch_version: str | None


class ConformanceMatrix(BaseModel):
    backends: list[BackendConformanceOut]


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


class MatrixCell(_Orm):
    backend: str
    torch_spec: str
    torch_build_id: int | None
    torch_version: str | None
    torch_git_version: str | None
    run_id: int
    state: str
    verdict: str | None
    verdict_subtype: str | None
    created_at: dt.datetime
    finished_at: dt.datetime | None


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


class Occurrence(_Orm):
    """The failures of one run that belong to the breakage (one night, one torch build)."""

    run_id: int
    run_state: str
    torch_spec: str
    torch_version: str | None
    torch_git_version: str | None
    run_created_at: dt.datetime
    failures: int
    nodeids: list[str]
    category: str | None = Field(
        None, description="What triage said of them in that run (the worst, by the one "
        "severity order)")


class ProbeOut(BaseModel):
    """One night a bisection tried: its probe run and what it showed about the breakage."""

    spec: str
    night: dt.date
    run_id: int | None = Field(description="null: the night had no run (not on the index)")
    run_state: str | None
    torch_version: str | None
    result: str = Field(description="pending, green, red, error (tried again), skipped")
    note: str | None


class NarrowedOut(BaseModel):
    """The narrowed range: the last green and the first red nightly (the range's ends
    until the bisection finishes)."""

    good: str = Field(description="torch version of the last green night")
    bad: str = Field(description="torch version of the first red night")
    good_sha: str | None
    bad_sha: str | None
    good_run_id: int
    bad_run_id: int


class BisectionOut(BaseModel):
    """The nightly bisection of a breakage whose range spans several nightlies."""

    state: str = Field(description="running, narrowed (adjacent nights), partial (skipped "
                       "nights left in between)")
    base_version: str = Field(description="The range the breakage opened with: its base")
    head_version: str
    probes: list[ProbeOut]
    narrowed_to: NarrowedOut | None
    note: str | None


class LinkOut(BaseModel):
    url: str
    by: str
    at: dt.datetime


class SnoozeOut(BaseModel):
    """Muted: shown, not red, and no label, comment or notification goes out."""

    until: dt.datetime | None = Field(description="Muted until then; null: until a newer torch")
    torch: str | None = Field(description="Muted until a run on a newer torch shows it")
    by: str | None
    reason: str | None
    active: bool = Field(description="False once the date has passed")


class DisputeOut(BaseModel):
    """"Not this PR": the suspect is passed over for this breakage."""

    pr: int
    reason: str
    by: str
    at: dt.datetime


class ClosedOut(BaseModel):
    """A person's close, distinct from resolved by a green run; it recurring reopens it."""

    at: dt.datetime
    by: str | None
    reason: str | None


class BreakageDetail(BreakageSummary):
    captures: dict[str, Any]
    note: str | None
    links: list[LinkOut] = []
    snooze: SnoozeOut | None = None
    disputes: list[DisputeOut] = []
    closed: ClosedOut | None = None
    resolved_by_run_id: int | None
    evidence: FailureOut | None = Field(description="The failure of its first occurrence")
    history: list[Occurrence] = Field(description="Failures grouped by run, newest first")
    bisection: BisectionOut | None = Field(
        None, description="The nightly bisection of its range; null when it needed none")


class RangeOut(BaseModel):
    """A regression range: the torch of the last green run (base) and of the red one (head)."""

    base: str | None = Field(description="git_version of the base torch; null: no range")
    head: str | None
    base_version: str | None
    head_version: str | None
    base_run_id: int | None
    note: str | None = Field(description="Why there is no usable range; null when there is one")
    compare_url: str | None


class VerificationOut(BaseModel):
    """A suspect undone in an overlay of the red torch, and what the run on it said."""

    state: str = Field(description="confirmed, refuted, unverifiable or error")
    run_id: int | None = Field(description="The run on the undone torch; null when none ran")
    evidence: str


class SuspectOut(BaseModel):
    sha: str
    pr: int | None
    title: str
    score: float = Field(ge=0, le=1)
    reasons: list[str]
    verification: VerificationOut | None = None
    disputed: bool = Field(False, description="A person said it is not this PR")


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


_TEXT = r"^[^\x00]*$"


class NoteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    note: str = Field(max_length=4000, pattern=_TEXT, description="Replaces it; empty clears it")


class LinkRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=500, pattern=_TEXT, description="A bug's http(s) URL")


class SnoozeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    until: str | None = Field(None, max_length=40, pattern=_TEXT,
                              description="ISO date (or date-time) in the future")
    torch: str | None = Field(None, max_length=100, pattern=_TEXT,
                              description="Until a run on a newer torch than this version")
    reason: str = Field("", max_length=1000, pattern=_TEXT)


class DisputeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pr: int = Field(ge=1, le=2**31 - 1, description="The suspect's PR number")
    reason: str = Field(min_length=1, max_length=1000, pattern=_TEXT)


class ReasonRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field("", max_length=1000, pattern=_TEXT)


class RunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backend: str = Field(min_length=1, max_length=100, pattern=r"^[^\x00]+$")
    torch: str = Field(
        min_length=1,
        max_length=1000,
        pattern=r"^[^\x00]+$",
        description="Torch spec, one of: " + ", ".join(SPEC_FORMS),
        examples=["installed", "pip:torch==2.13.0", "nightly", "nightly:2026-11-20"],
    )

    @field_validator("torch")
    @classmethod
    def _torch_spec_parses(cls, value: str) -> str:
        """The one grammar (``service/domain/torch_spec.py``), as the CLI checks it; whether
        a remote caller may run the spec is the route's to say (``service/domain/admission.py``)."""
        try:
            parse_spec(value)
        except TorchSpecError as exc:
            # The reason goes in as context: a spec's own braces are no template fields.
            raise PydanticCustomError("torch_spec", "{reason}", {"reason": str(exc)}) from None
        return value


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


# --- one upstream PR (`GET /api/prs/{number}`, the page /prs/{number}) -------------------


class PrRunOut(_Orm):
    """A run of one backend against the PR's own torch wheel."""

    run_id: int
    backend: str
    state: str
    verdict: str | None
    verdict_subtype: str | None
    verdict_reason: str | None
    torch_spec: str
    torch_version: str | None
    torch_git_version: str | None
    head_sha: str | None = Field(description="The PR's head commit the run was made for")
    created_at: dt.datetime
    finished_at: dt.datetime | None


class PrSuspicionOut(_Orm):
    """A breakage whose culprit ranking names the PR."""

    breakage_id: int
    backend: str
    title: str
    status: str
    category: str | None
    subtype: str | None
    rank: int = Field(description="1: the breakage's top suspect")
    sha: str = Field(description="The commit the PR landed as")
    score: float
    reasons: list[str]
    verification: str | None = Field(
        description="confirmed | refuted | unverifiable | error; null: not verified")
    evidence: str | None
    verification_run_id: int | None
    range_base_sha: str | None
    range_head_sha: str | None


class ReproOut(_Orm):
    backend: str
    torch: str
    why: str
    command: str = Field(description="ootci run --torch SPEC --backend NAME")


class PrOut(BaseModel):
    number: int
    title: str | None
    url: str = Field(description="The PR on GitHub")
    backends: list[str]
    runs: list[PrRunOut]
    suspicions: list[PrSuspicionOut]
    repro: list[ReproOut]
    shas: list[str] = Field(description="Every torch commit sha involved")
