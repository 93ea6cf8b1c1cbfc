"""The collect step: turn a run's build/test outcome into classified, triaged failures,
group them into breakages, and decide the run's state and verdict.

In two halves, so an isolating run can come between them: :func:`triage_failures`
classifies and triages by history, writing nothing; the pipeline isolates what the history
cannot blame (``isolate.py``) and :func:`retriage` adds its answers; :func:`conclude` stores
the failures, groups them into breakages and sets the run's verdict. :func:`collect` is
both halves at once (``ootci reclassify``). Runs inside the caller's session; never commits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from sqlalchemy.orm import Session

from service.commands import culprits, flaky
from service.commands.breakages import record_occurrences, resolve_fixed
from service.commands.notifications import (
    breakage_subject,
    notify,
    notify_breakage,
    vendor_status,
)
from service.commands.torch_builds import record_torch_build
from service.config import Settings
from service.domain.classify import (
    backend_packages,
    blame_own_module,
    classify_log,
    classify_test_failure,
)
from service.domain.consequences import StepFailure, fold
from service.domain.experiments import EXPERIMENTS
from service.domain.notify import Event
from service.domain.triage import IsolationResult, TriageEvidence, judge_run, triage
from service.domain.verdict import Category, Finding, Stage, TriageVerdict
from service.models import (
    Backend,
    Breakage,
    Failure,
    Outcome,
    Run,
    RunState,
    Step,
    StepName,
    StepStatus,
    TorchBuild,
)
from service.queries import flaky as flaky_queries
from service.queries.baseline import history_for
from service.queries.conformance import previously_working
from service.queries.regression import range_for
from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.steps.outcome import StepOutcome
from workers.pipeline.testrun.conformance import ConformanceOutcome
from workers.pipeline.testrun.records import TestRecord, TestRunOutcome


def with_regressions(
    session: Session, run: Run, tests: TestRunOutcome, conformance: ConformanceOutcome,
    note: Callable[[str], None],
) -> TestRunOutcome:
    """The backend's test results plus the failed conformance tests of each mechanism that
    worked in its previous run: a regression is classified, triaged and grouped into a
    breakage like a failure of its own suite. A mechanism the backend never got right is
    what it implements, shown on the conformance page, not a breakage."""
    before = previously_working(session, run)
    regressed = {m.mechanism for m in conformance.mechanisms if m.failed and m.mechanism in before}
    if not regressed:
        return tests
    failing = {n for m in conformance.mechanisms if m.mechanism in regressed for n in m.failing}
    note(f"ootci: conformance regressions: {', '.join(sorted(regressed))}\n")
    extra = tuple(r for r in conformance.records if r.nodeid in failing)
    return TestRunOutcome(step=tests.step, results=(*tests.results, *extra))


def upsert_torch_build(session: Session, env: TorchEnv) -> TorchBuild:
    """The provision step's TorchBuild row, written through the torch-build command."""
    return record_torch_build(
        session,
        spec=env.spec,
        source_kind=env.source_kind,
        version=env.version,
        git_version=env.git_version,
        env_key=env.env_key,
        python=str(env.python),
    )


def _read_log(step: Step | None) -> bytes:
    return step.read_log() if step is not None else b""


def _step(run: Run, name: StepName) -> Step | None:
    return next((s for s in run.steps if s.name == name), None)


def _classified_failures(
    run: Run,
    build: StepOutcome | None,
    tests: TestRunOutcome | None,
    own: frozenset[str],
    provision: StepOutcome | None = None,
) -> list[tuple[Failure, Finding | None]]:
    found: list[tuple[Failure, Finding | None]] = []
    if provision is not None and provision.status is not StepStatus.PASSED:
        # torch itself does not import (the only provision failure that reaches collect).
        finding = classify_log(_read_log(_step(run, StepName.PROVISION)), Stage.PROVISION,
                               evidence=provision.summary)
        found.append((_failure(run.id, StepName.PROVISION, Stage.PROVISION, None, finding,
                               provision), finding))
        return found
    if build is None:
        return found
    if build.status is not StepStatus.PASSED:
        # The summary is the worker's own (bwrap's set-up failure): the sandbox's evidence.
        finding = classify_log(_read_log(_step(run, StepName.BUILD)), Stage.BUILD,
                               evidence=build.summary)
        found.append((_failure(run.id, StepName.BUILD, Stage.BUILD, None, finding, build), finding))
        return found
    if tests is None:
        return found
    results = [r for r in tests.results if r.outcome in Outcome.CLASSIFIED]
    for r in results:
        stage, finding = classify_test_record(r, own)
        found.append((_failure(run.id, StepName.TEST, stage, r.nodeid, finding, None), finding))
    if not results and tests.step.status is not StepStatus.PASSED:
        # The runner itself failed (no per-test evidence): classify its log.
        finding = classify_log(_read_log(_step(run, StepName.TEST)), Stage.TEST)
        found.append(
            (_failure(run.id, StepName.TEST, Stage.TEST, None, finding, tests.step), finding)
        )
    return found


def classify_test_record(record: TestRecord, own: frozenset[str]) -> tuple[Stage, Finding]:
    """A failing test's stage and finding, the one way every step classifies them (the run's
    own tests here, the isolating run's in ``isolate.py``), so their fingerprints compare. A
    test module that fails to import (a collection error) is the import stage: that is where
    an undefined symbol in the backend's .so shows up."""
    stage = (Stage.IMPORT if record.outcome == Outcome.ERROR and "::" not in record.nodeid
             else Stage.TEST)
    finding = classify_test_failure(record.nodeid, record.message, record.details, stage,
                                    outcome=record.outcome)
    return stage, blame_own_module(finding, own)


def _failure(
    run_id: int,
    step: StepName,
    stage: Stage,
    nodeid: str | None,
    finding: Finding | None,
    outcome: StepOutcome | None,
) -> Failure:
    if finding is None:
        return Failure(
            run_id=run_id,
            step_name=step,
            stage=stage,
            nodeid=nodeid,
            line=(outcome.summary if outcome else "") or f"{step.value} failed (no rule matched)",
            line_no=None,
            category=Category.UNKNOWN.value,
            subtype="generic",
            rule=None,
        )
    return Failure(
        run_id=run_id,
        step_name=step,
        stage=finding.stage.value,
        nodeid=nodeid,
        line=finding.line,
        line_no=finding.line_number or None,
        captures=dict(finding.captures),
        category=finding.category.value,
        subtype=finding.subtype.value,
        rule=finding.rule,
        fingerprint=finding.fingerprint or None,
        fingerprint_version=finding.fingerprint_version or None,
        finding=finding.to_dict(),
    )


@dataclass(frozen=True)
class Triaged:
    """One failure of the run, classified and triaged (not stored yet): the evidence it was
    triaged on, so an isolating run's answer can be added to it (:func:`retriage`)."""

    failure: Failure
    finding: Finding | None
    evidence: TriageEvidence
    verdict: TriageVerdict


def triage_failures(
    session: Session,
    run: Run,
    build: StepOutcome | None,
    tests: TestRunOutcome | None,
    *,
    provision: StepOutcome | None = None,
) -> list[Triaged]:
    """Classify the run's failures and triage each against its history; nothing is written
    (the failures are not added to ``session``). ``build`` is None when the ``provision``
    step failed (torch itself does not import)."""
    own = backend_packages(session.get_one(Backend, run.backend_id).name)
    pairs = fold_consequences(_classified_failures(run, build, tests, own, provision), tests)
    flaky = {r.nodeid for r in (tests.results if tests else ()) if r.outcome == Outcome.FLAKY}
    history = history_for(session, run, [f for f, _ in pairs])
    found = []
    for failure, finding in pairs:
        evidence = history.evidence(failure, passed_on_rerun=failure.nodeid in flaky)
        found.append(Triaged(failure, finding, evidence, triage(finding, evidence)))
    return found


def retriage(triaged: list[Triaged], isolated: Mapping[int, IsolationResult]) -> list[Triaged]:
    """The failures again, those at the indexes of ``isolated`` triaged with what the
    isolating run found for them."""
    again = list(triaged)
    for i, result in isolated.items():
        t = triaged[i]
        evidence = replace(t.evidence, isolation=result)
        again[i] = replace(t, evidence=evidence, verdict=triage(t.finding, evidence))
    return again


def fold_consequences(
    pairs: list[tuple[Failure, Finding | None]], tests: TestRunOutcome | None
) -> list[tuple[Failure, Finding | None]]:
    """``pairs`` without the failures that only repeat an earlier one's cause (the modules
    a half-imported torch fails after the first import error, a crash at session exit
    after it: ``service/domain/consequences.py``), in the order they were recorded. Each
    cause lists its consequences; they get no row and no breakage of their own."""
    messages = {r.nodeid: r.message for r in (tests.results if tests else ())}
    steps = [StepFailure(f.nodeid, f.stage, "\n".join(
        m for m in (messages.get(f.nodeid or ""), f.line) if m), f.fingerprint)
        for f, _ in pairs]
    folded = fold(steps)
    for index, cause in sorted(folded.items()):
        failure, root = pairs[index][0], pairs[cause][0]
        message = messages.get(failure.nodeid or "") or failure.line
        root.consequences = [*(root.consequences or ()),
                             {"nodeid": failure.nodeid, "message": message}]
    return [pair for i, pair in enumerate(pairs) if i not in folded]


def collect(
    session: Session,
    run: Run,
    build: StepOutcome | None,
    tests: TestRunOutcome | None,
    settings: Settings,
    note: Callable[[str], None],
    *,
    provision: StepOutcome | None = None,
) -> RunState:
    """Classify, triage and group the run's failures; return the state the run ends in
    (no isolating run: ``ootci reclassify``'s replay)."""
    triaged = triage_failures(session, run, build, tests, provision=provision)
    return conclude(session, run, triaged, build, tests, settings, note, update_quarantine=False)


def _quarantine(
    session: Session, run: Run, tests: TestRunOutcome | None, settings: Settings
) -> set[str]:
    """Move the backend's quarantine by this run's tests (in, by the flakiness rate over
    the last OOTCI_FLAKY_WINDOW runs; out, after OOTCI_FLAKY_RELEASE_AFTER clean runs) and
    return what is quarantined now: a test quarantined by this very run does not fail it."""
    outcomes = {r.nodeid: r.outcome for r in (tests.results if tests else ())}
    failing = [n for n, o in outcomes.items() if o in Outcome.CLASSIFIED]
    measured = flaky_queries.stats(
        session, flaky_queries.window(session, run.backend_id, settings.flaky_window, upto=run.id),
        failing) if failing else {}
    flaky.after_run(session, session.get_one(Backend, run.backend_id), outcomes, measured,
                    threshold=settings.flaky_quarantine_rate,
                    release_after=settings.flaky_release_after)
    session.flush()
    return flaky_queries.quarantined_nodeids(session, run.backend_id)


def conclude(
    session: Session,
    run: Run,
    triaged: list[Triaged],
    build: StepOutcome | None,
    tests: TestRunOutcome | None,
    settings: Settings,
    note: Callable[[str], None],
    *,
    update_quarantine: bool = True,
) -> RunState:
    """Store the triaged failures, group them into breakages and return the state the run
    ends in (its verdict set). ``update_quarantine``: this run's tests move the quarantine
    (a replay, ``ootci reclassify``, only reads it; so does an experiment about a
    breakage, ``service/domain/experiments.py``: a partial suite on another torch)."""
    experiment = run.trigger in EXPERIMENTS
    pairs = [(t.failure, t.finding) for t in triaged]
    flaky = {r.nodeid for r in (tests.results if tests else ()) if r.outcome == Outcome.FLAKY}
    held = _quarantine(session, run, tests, settings) if update_quarantine and not experiment \
        else flaky_queries.quarantined_nodeids(session, run.backend_id)
    verdicts: list[TriageVerdict] = []
    for t in triaged:
        failure, verdict = t.failure, t.verdict
        failure.triage = verdict.category.value
        failure.triage_reason = verdict.reason
        failure.needs_isolation = verdict.needs_isolation
        failure.isolate_against_run_id = verdict.isolate_against_run_id
        failure.quarantined = failure.nodeid in held
        isolation = t.evidence.isolation
        failure.isolation = isolation.to_dict() if isolation is not None else None
        verdicts.append(verdict)
        session.add(failure)
        note(
            f"{failure.stage} {failure.nodeid or ''}: {failure.triage}/{failure.subtype} "
            f"(rule {failure.rule} suggests {failure.category})\n    {failure.line}\n"
        )
    session.flush()

    if not experiment:
        _group(session, run, pairs, build, settings, note, tests)

    # A test that passed on rerun does not fail the run (a flake nothing cleared does), nor
    # does a quarantined one.
    real = [v for (f, _), v in zip(pairs, verdicts, strict=True)
            if f.nodeid not in flaky and not f.quarantined]
    if not real:
        state = RunState.PASSED
    elif all(v.category is Category.INFRA for v in real) or (
        build is not None and build.status is StepStatus.ERRORED
    ):
        state = RunState.ERRORED
    else:
        state = RunState.FAILED
    counted = [v for (f, _), v in zip(pairs, verdicts, strict=True) if not f.quarantined]
    judged = judge_run(counted, passed=state is RunState.PASSED)
    ignored = sum(1 for f, _ in pairs if f.quarantined)
    reason = judged.reason + (f"; {ignored} quarantined failure{'s' if ignored != 1 else ''} "
                              "not counted" if ignored else "")
    run.verdict, run.verdict_subtype, run.verdict_reason = judged.verdict, judged.subtype, reason
    note(f"run {run.id}: {state.value}; verdict {run.verdict or '-'}\n")
    if experiment:
        return state  # its job reads it; nobody is told about an experiment's end
    if state is RunState.ERRORED:
        notify_run_errored(session, run, run.verdict_reason or "", settings)
    else:
        tell_vendor(session, run, state, run.verdict_reason or state.value, settings)
    return state


def _group(
    session: Session,
    run: Run,
    pairs: list[tuple[Failure, Finding | None]],
    build: StepOutcome | None,
    settings: Settings,
    note: Callable[[str], None],
    tests: TestRunOutcome | None,
) -> None:
    """Group the run's failures into breakages, resolve those it shows fixed, tell the
    backend's subscribers and hand them to the upstream loop. An experiment about a
    breakage does none of it (a bisection probe on another night, a culprit verification
    on an undone torch: their jobs read their failures, ``workers/jobs/{bisect,verify}.py``);
    counting one would add occurrences, refresh PR comments and resolve breakages on
    torches nobody tracks."""
    # A quarantined test's failure is kept and shown, but opens and feeds no breakage (its
    # fingerprint still counts as seen below: its breakage is not "fixed" by it either).
    touched = record_occurrences(session, run, [f for f, _ in pairs if not f.quarantined])
    built = build is not None and build.status is StepStatus.PASSED
    observed = {Stage.BUILD.value} if built else set()
    if tests is not None and tests.step.status is not StepStatus.ERRORED:
        observed |= {Stage.IMPORT.value, Stage.TEST.value}
    resolved = resolve_fixed(
        session, run, {f.fingerprint for f, _ in pairs if f.fingerprint}, observed
    )
    for b in resolved:
        note(f"resolved breakage {b.id}: {b.title}\n")
    _tell_subscribers(session, run, touched, resolved, settings)
    # The upstream loop: new breakages get their regression range (and an analysis of it
    # queued), reported ones get their PR's comment refreshed; GitHub is reached later,
    # from the outbox, never inside the run's transaction.
    culprits.after_run(
        session, run, touched, resolved, found=range_for(session, run),
        repo=settings.upstream_repo, min_score=settings.culprit_min_score,
    )


# A run's end as the vendor's commit status says it.
_STATUS_OF = {RunState.PASSED: "success", RunState.FAILED: "failure", RunState.ERRORED: "error"}


def tell_vendor(
    session: Session, run: Run, state: RunState, description: str, settings: Settings
) -> None:
    """The commit status on the vendor's pushed commit (a push-triggered run only)."""
    base = settings.public_url.rstrip("/")
    vendor_status(session, run, _STATUS_OF.get(state, "error"), description,
                  upstream_repo=settings.watched_upstream_repo,
                  url=f"{base}/runs/{run.id}" if base else None)


def _tell_subscribers(
    session: Session, run: Run, touched: list[Breakage], resolved: list[Breakage],
    settings: Settings,
) -> None:
    """New and resolved breakages, to the backend's subscribers (through the outbox)."""
    base = settings.public_url.rstrip("/")
    for event, found in ((Event.NEW_BREAKAGE, [b for b in touched
                                               if b.first_seen_run_id == run.id]),
                         (Event.RESOLVED, resolved)):
        for b in found:
            notify_breakage(session, b, event, breakage_subject(b),
                            key=f"breakage:{b.id}:{b.first_seen_run_id}",
                            url=f"{base}/breakages/{b.id}" if base else None,
                            digest_hour=settings.notify_digest_hour)


def notify_run_errored(session: Session, run: Run, error: str, settings: Settings) -> None:
    base = settings.public_url.rstrip("/")
    notify(session, run.backend_id, Event.RUN_ERRORED,
           {"id": run.id, "torch": run.torch_spec, "error": error.splitlines()[0][:300]
            if error else ""},
           key=f"run:{run.id}", url=f"{base}/runs/{run.id}" if base else None,
           digest_hour=settings.notify_digest_hour)
    tell_vendor(session, run, RunState.ERRORED, error.splitlines()[0] if error else "errored",
                settings)
