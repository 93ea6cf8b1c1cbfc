"""Run one compatibility run end to end: claim -> source -> provision -> build -> test ->
conformance -> isolate (when triage cannot blame a failure by its history) -> collect.

The orchestration only: which step runs when, with what, and how the run ends. What every
step shares (the run's context, its lease, its step rows and logs, database writes that
wait out an outage) is ``run_context.py``; what each step does is its package's (``env/``,
``steps/``, ``testrun/``, ``verdict/``). A step that cannot do its job raises a
``PipelineError``; its kind (``errors.py``) decides how the run ends (:func:`_ended_by`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, delete

from service.commands.conformance import record_conformance
from service.commands.runs import claim_run
from service.commands.torch_builds import record_artifact
from service.config import Settings
from service.db import session_scope
from service.domain.experiments import EXPERIMENTS
from service.domain.states import StepStatus as OutcomeStatus
from service.domain.torch_spec import SourceKind, TorchSpec
from service.domain.triage import Isolated, IsolationResult
from service.domain.verdict import ErrorKind, error_text
from service.models import (
    Backend,
    ConformanceResult,
    Failure,
    Run,
    RunState,
    StepName,
    TestResult,
)
from service.queries.test_timings import seconds_per_file
from service.queries.torch_builds import NoRecordedTorch, recorded_torch
from service.secrets import make_nondumpable
from workers.pipeline.cache.gc import collect_garbage_per_settings, remove_tree
from workers.pipeline.cache.layout import build_dir as cache_build_dir
from workers.pipeline.cache.layout import stamp
from workers.pipeline.env.commit_dates import commit_date
from workers.pipeline.env.probe_sandbox import probe_sandbox
from workers.pipeline.env.provision import provision
from workers.pipeline.env.resolve import parse_spec
from workers.pipeline.env.run_env import private_env
from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.env.wheel_fetch import OutsideWheel, outside_wheel_spec
from workers.pipeline.errors import PipelineError, SpecError, TorchUnusable
from workers.pipeline.isolation.child_env import child_environment
from workers.pipeline.isolation.policy import require_sandbox
from workers.pipeline.isolation.procs import Attempt, attempt_scope, reap_groups
from workers.pipeline.isolation.sandbox import (
    StepSandbox,
    probe,
)
from workers.pipeline.logs.sink import LogSink
from workers.pipeline.run_context import (
    EventSink,
    LeaseLost,
    RunContext,
    RunEvent,
    ignore_events,
    infra_reason,
)
from workers.pipeline.steps.build import build, build_sandbox, ccache_dir_for
from workers.pipeline.steps.outcome import StepOutcome
from workers.pipeline.steps.recipe import Recipe, load_recipe
from workers.pipeline.steps.source_tree import RunTree, Source, run_tree
from workers.pipeline.testrun.compile_cache import compile_cache_scope
from workers.pipeline.testrun.conformance import ConformanceOutcome, run_conformance
from workers.pipeline.testrun.parallel import default_processes
from workers.pipeline.testrun.records import TestRunOutcome
from workers.pipeline.testrun.runner import TestRunOptions, run_tests
from workers.pipeline.testrun.shards import ShardDispatch, run_sharded
from workers.pipeline.testrun.suite_sandbox import suite_sandbox
from workers.pipeline.verdict import collect, isolate

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Claimed:
    """What the run's row says about the attempt just claimed."""

    spec_text: str
    source: Source
    pinned_sha: str | None
    only_tests: list[str] | None  # a rerun's failed tests; None = the whole suite
    attempt: int


def execute_run(
    engine: Engine,
    settings: Settings,
    run_id: int,
    worker_id: str,
    *,
    on_event: EventSink | None = None,
    retry_infra: bool = False,
    dispatch_shards: ShardDispatch | None = None,
) -> str | None:
    """Execute a queued run. Returns the final state, or None when the run was not ours to
    take (already finished, leased by another live worker, or waiting for its retry time).
    Pipeline failures are recorded on the run, never raised: the run ends ``failed`` (the
    backend or upstream broke) or ``errored`` (bad input or infrastructure).

    With ``retry_infra`` (the workers), an attempt that failed on infrastructure while
    ``settings.infra_retries`` allows another puts the run back in the queue with a backoff
    (``runs.retry_at``) and returns ``queued``: the caller schedules the retry. An
    interactive ``ootci run`` reports the failure at once instead."""
    claimed = _claim(engine, settings, run_id, worker_id)
    if claimed is None:
        return None
    ctx = RunContext(engine, settings, run_id, worker_id, on_event or ignore_events,
                     claimed.only_tests, attempt=claimed.attempt)
    ctx.dispatch_shards = dispatch_shards
    groups_file = ctx.run_dir / "process-groups"
    if claimed.attempt > 1:
        # What a killed earlier attempt left running would build beside this one.
        reaped = reap_groups(groups_file)
        if reaped:
            log.warning("run %s: killed groups of attempt %s: %s", run_id, claimed.attempt - 1,
                        reaped)
    if settings.sandbox:
        probe(settings.sandbox_uid, settings.bwrap)  # once per process: logs what works
        make_nondumpable()  # the entry point did; a worker embedded by a caller may not have
    if claimed.attempt == 1:
        _fresh_run_dir(ctx.run_dir)
    try:
        # Before any of the backend's code: a sandbox that broke since the entry point asked.
        require_sandbox(settings)
        ctx.run_dir.mkdir(parents=True, exist_ok=True)
        with (
            ctx.heartbeat,
            attempt_scope(Attempt(abort=ctx.heartbeat.abort_reason, groups_file=groups_file)),
            child_environment(ctx.child_policy),
            compile_cache_scope(ctx.run_dir),
        ):
            state = _pipeline(ctx, claimed)
    except LeaseLost:
        log.warning("run %s: lease lost to another worker; stopping", run_id)
        return None
    except Exception as raised:
        state = _ended_by(ctx, raised, retry_infra=retry_infra)
    ctx.on_event(RunEvent(run_id, "done", "", state.value))
    return state.value


def _fresh_run_dir(run_dir: Path) -> None:
    """A first attempt starts in an empty dir: files left under this id (a refused run's
    whose row was deleted, a database restored from a backup) are never this run's logs."""
    if run_dir.exists():
        log.warning("run dir %s holds files of an earlier run under this id: removed", run_dir)
        remove_tree(run_dir)


def _claim(engine: Engine, settings: Settings, run_id: int, worker_id: str) -> _Claimed | None:
    """Claim the run for a new attempt (None: not ours to take)."""
    with session_scope(engine) as s:
        if not claim_run(s, run_id, worker_id, settings.run_lease_s):
            return None
        run = s.get_one(Run, run_id)
        if run.attempts > 1:
            # An earlier attempt failed or its worker died: start over from a clean slate.
            # Its steps stay (tagged with their attempt) as the history the run page folds.
            for model in (Failure, TestResult, ConformanceResult):
                s.execute(delete(model).where(model.run_id == run_id))
        # Stored before any step: every surface marks a run the operator let out unsealed.
        run.sandboxed = settings.sandbox
        backend = s.get_one(Backend, run.backend_id)
        return _Claimed(
            spec_text=run.torch_spec,
            source=Source(backend.name, backend.source, backend.ref, backend.subdir),
            pinned_sha=run.backend_sha,
            only_tests=_tests_to_rerun(run),
            attempt=run.attempts,
        )


def _ended_by(ctx: RunContext, raised: Exception, *, retry_infra: bool) -> RunState:
    """How the run ends when ``raised`` stopped it (called while handling it): its kind is
    stored on the run and sets the verdict; an infra error is retried when allowed."""
    exc = _as_pipeline_error(raised)
    if exc is None:
        log.exception("run %s: internal error", ctx.run_id)
        return ctx.finish(RunState.ERRORED, ErrorKind.INTERNAL, f"internal error: {raised!r}")
    if retry_infra and exc.kind is ErrorKind.INFRA:
        if ctx.requeue_for_retry(exc):
            return RunState.QUEUED
        attempts = 1 + ctx.settings.infra_retries
        return ctx.finish(RunState.ERRORED, exc.kind,
                          f"infra error on the last of {attempts} attempts: {exc}")
    return ctx.finish(RunState.ERRORED, exc.kind, error_text(exc.kind, str(exc)))


def _as_pipeline_error(exc: BaseException) -> PipelineError | None:
    """The pipeline's own errors, and the machine's faults met anywhere (a full disk, the
    database gone longer than a write waits) as infra; None for a bug of ootci's."""
    if isinstance(exc, PipelineError):
        return exc
    reason = infra_reason(exc)
    return PipelineError(reason) if reason is not None else None


def _pipeline(ctx: RunContext, claimed: _Claimed) -> RunState:
    # Built and tested in the run's own tree, never in the registered source (issue #14).
    cache_dir = ctx.settings.resolved_cache_dir
    with run_tree(cache_dir, claimed.source, pinned_sha=claimed.pinned_sha,
                  credentials=ctx.settings.git_tokens()) as tree:
        return _pipeline_in(ctx, claimed.spec_text, tree)


def _pipeline_in(ctx: RunContext, spec_text: str, tree: RunTree) -> RunState:
    settings = ctx.settings
    recipe = load_recipe(tree.path)
    with session_scope(ctx.engine) as s:
        backend = s.get_one(Backend, s.get_one(Run, ctx.run_id).backend_id)
        backend.recipe = recipe.summary()
        s.get_one(Run, ctx.run_id).backend_sha = tree.sha

    _collect_cache_garbage(ctx)
    env = _provision_step(ctx, spec_text)
    if isinstance(env, StepOutcome):  # torch itself does not import: nothing to build
        return _judge(ctx, recipe, tree, _Outcomes(None, None, None, provision=env))
    build_dir = cache_build_dir(settings.resolved_cache_dir, recipe.name, env.env_key, tree.key)
    stamp(build_dir)  # one per (torch build, backend source): reused by a rerun of the pair
    build_outcome = _build_step(ctx, recipe, env, build_dir)
    tests: TestRunOutcome | None = None
    conformance: ConformanceOutcome | None = None
    if build_outcome.status is OutcomeStatus.PASSED:
        tests = _test_step(ctx, recipe, env, build_dir)
        if recipe.conformance_device is not None:
            conformance = _conformance_step(ctx, recipe, env, build_dir)
    return _judge(ctx, recipe, tree, _Outcomes(build_outcome, tests, conformance))


@dataclass(frozen=True)
class _Outcomes:
    """What the run's steps gave the verdict: ``build`` is None when the ``provision`` step
    failed (torch itself does not import)."""

    build: StepOutcome | None
    tests: TestRunOutcome | None
    conformance: ConformanceOutcome | None
    provision: StepOutcome | None = None


def _judge(ctx: RunContext, recipe: Recipe, tree: RunTree, got: _Outcomes) -> RunState:
    """Triage by history; isolate what it cannot blame (the isolate step); then the collect
    step stores the failures, groups them into breakages and sets the verdict."""
    notes: list[str] = []
    tests, conformance = got.tests, got.conformance
    with session_scope(ctx.engine) as s:
        run = s.get_one(Run, ctx.run_id)
        if tests is not None and conformance is not None:
            tests = collect.with_regressions(s, run, tests, conformance, notes.append)
        triaged = collect.triage_failures(s, run, got.build, tests, provision=got.provision)
        plan = isolate.plan(s, run, triaged, ctx.settings, frozenset(
            r.nodeid for r in (conformance.records if conformance else ())))
    if plan is not None:
        triaged = collect.retriage(triaged, _isolate_step(ctx, recipe, tree, plan))
    with ctx.step(StepName.COLLECT) as (sink, _), session_scope(ctx.engine) as s:
        for note in notes:
            sink.write(note)
        run = s.get_one(Run, ctx.run_id)
        state = collect.conclude(s, run, triaged, got.build, tests, ctx.settings, sink.write)
        run.transition(state)
    return state


def _isolate_step(
    ctx: RunContext, recipe: Recipe, tree: RunTree, plan: isolate.Plan
) -> dict[int, IsolationResult]:
    """The isolating run, as a step of its own with its own log; without a reference torch
    nothing runs and no step is opened (each failure's reason says why)."""
    if not plan.runs_anything:
        return isolate.unanswered(plan)
    where = isolate.Where(ctx.settings, ctx.child_policy, ctx.masker, ctx.run_dir, recipe,
                          tree.key)
    with ctx.step(StepName.ISOLATE) as (sink, outcomes):
        results, summary = isolate.isolate(plan, where, sink)
        ran = any(r.outcome is not Isolated.NOT_RUN for r in results.values())
        status = OutcomeStatus.PASSED if ran else OutcomeStatus.SKIPPED
        outcomes.append(StepOutcome(status, None, summary, sink.path))
    return results


def _collect_cache_garbage(ctx: RunContext) -> None:
    """Each worker cleans its own cache before adding to it. Never fails the run: a full
    disk shows up as a provision or build error with its own message."""
    try:
        report = collect_garbage_per_settings(ctx.settings, log=log.info)
    except Exception:
        log.exception("run %s: cache garbage collection failed", ctx.run_id)
        return
    if report.removed:
        log.info(
            "run %s: removed %d unused envs/build dirs, %.1f GB",
            ctx.run_id,
            len(report.removed),
            report.freed_bytes / 1e9,
        )


def _provision_step(ctx: RunContext, spec_text: str) -> TorchEnv | StepOutcome:
    """The run's private env over the shared base env of its torch; the failed step's
    outcome when torch itself does not import (upstream's break, classified by collect)."""
    settings = ctx.settings
    with ctx.step(StepName.PROVISION) as (sink, outcomes):
        spec = parse_spec(
            spec_text,
            nightly_index_url=settings.nightly_index_url,
            pip_index_url=settings.pip_index_url,
        )
        if spec.kind is SourceKind.RUN:
            spec = _pinned_to_recorded_wheel(ctx, spec, sink)
        outside = _wheel_from_outside(ctx)
        if outside is not None:
            spec = outside_wheel_spec(spec, settings.resolved_cache_dir, sink, outside)
        committed = commit_date(settings, spec.commit, sink) if spec.kind is SourceKind.COMMIT else None
        try:
            base = provision(spec, settings.resolved_cache_dir, sink, commit_date=committed,
                             package_cache=settings.resolved_package_cache_dir,
                             probe_sandbox=probe_sandbox(settings, ctx.child_policy))
        except TorchUnusable as exc:
            sink.write(f"ootci: {exc}\n")
            outcomes.append(StepOutcome(OutcomeStatus.FAILED, None, str(exc)[:2000], sink.path))
            return outcomes[-1]
        sink.write(f"ootci: torch {base.version} ({base.git_version}) at {base.torch_dir}\n")
        env = private_env(base, ctx.run_dir)
        sink.write(f"ootci: the run's own env {env.venv_dir} over {base.venv_dir} (read-only)\n")
        with session_scope(ctx.engine) as s:
            tb = collect.upsert_torch_build(s, base)
            record_artifact(tb, base.artifact_url, base.artifact_sha256)
            s.get_one(Run, ctx.run_id).torch_build_id = tb.id
    return env


def _wheel_from_outside(ctx: RunContext) -> OutsideWheel | None:
    """A PR run's wheel was named by a relay or the template: fetched under the wheel
    rules again here, whatever the door let through (docs/security.md)."""
    with session_scope(ctx.engine) as s:
        info = s.get_one(Run, ctx.run_id).trigger_info or {}
    if not info.get("wheel_source"):
        return None
    settings = ctx.settings
    return OutsideWheel(settings.wheel_policy, str(info.get("wheel_sha256") or ""),
                        settings.wheel_ca_file)


def _pinned_to_recorded_wheel(ctx: RunContext, spec: TorchSpec, sink: LogSink) -> TorchSpec:
    """``run:<id>``: the wheel that run installed, refused if its bytes changed since."""
    with session_scope(ctx.engine) as s:
        try:
            recorded = recorded_torch(s, spec.run_id)
        except NoRecordedTorch as exc:
            raise SpecError(str(exc)) from None
    sink.write(
        f"ootci: {spec.text!r} is torch {recorded.version} ({recorded.git_version}) "
        f"from {recorded.url} sha256={recorded.sha256}\n"
    )
    return TorchSpec(
        spec.text, SourceKind.WHEEL, location=recorded.url, sha256=recorded.sha256
    )


def _build_step(ctx: RunContext, recipe: Recipe, env: TorchEnv, build_dir: Path) -> StepOutcome:
    with ctx.step(StepName.BUILD) as (sink, outcomes):
        sandbox = build_sandbox(ctx.settings, ctx.child_policy, recipe, env, build_dir, ctx.run_dir)
        outcome = build(
            recipe, env, build_dir, sink, timeout_s=ctx.settings.step_timeout_s, sandbox=sandbox,
            ccache_dir=ccache_dir_for(ctx.settings, recipe),
        )
        outcomes.append(outcome)
    return outcome


def _sandbox_for_suite(
    ctx: RunContext, recipe: Recipe, env: TorchEnv, build_dir: Path, work_dir: Path
) -> StepSandbox:
    return suite_sandbox(ctx.settings, ctx.child_policy, env, build_dir=build_dir,
                         source_dir=recipe.source_dir, work_dir=work_dir, run_dir=ctx.run_dir)


def _test_step(
    ctx: RunContext, recipe: Recipe, env: TorchEnv, build_dir: Path
) -> TestRunOutcome:
    with ctx.step(StepName.TEST) as (sink, outcomes):
        sandbox = _sandbox_for_suite(ctx, recipe, env, build_dir, ctx.run_dir / "test")
        with session_scope(ctx.engine) as s:
            file_seconds = seconds_per_file(s, s.get_one(Run, ctx.run_id))
        sharded = _sharded_tests(ctx, recipe, env, build_dir, sink, sandbox, file_seconds)
        result = sharded or run_tests(
            recipe, env, ctx.run_dir / "test", sink,
            TestRunOptions.of_settings(
                ctx.settings, build_dir=build_dir, only=ctx.only_tests, sandbox=sandbox,
                processes=ctx.settings.test_processes or default_processes(),
                masker=ctx.masker, file_seconds=file_seconds,
            ),
        )
        outcomes.append(result.step)
        with session_scope(ctx.engine) as s:
            s.add_all(
                TestResult(
                    run_id=ctx.run_id,
                    nodeid=r.nodeid,
                    suite=r.suite,
                    outcome=r.outcome,
                    duration_s=r.duration_s,
                    message=r.message,
                    details=r.details,
                )
                for r in result.results
            )
    return result


def _sharded_tests(
    ctx: RunContext,
    recipe: Recipe,
    env: TorchEnv,
    build_dir: Path,
    sink: LogSink,
    sandbox: StepSandbox,
    file_seconds: dict[str, float],
) -> TestRunOutcome | None:
    """The test step split over workers when sharding is on and the suite is large enough;
    None: run it here (a rerun of named failures is never sharded)."""
    if ctx.dispatch_shards is None or ctx.settings.test_shards < 2 or ctx.only_tests:
        return None
    return run_sharded(
        ctx.engine, ctx.settings, ctx.run_id, ctx.worker_id, recipe, env, build_dir,
        ctx.run_dir / "test", sink, dispatch=ctx.dispatch_shards, sandbox=sandbox,
        check_lease=ctx.check_lease, masker=ctx.masker, file_seconds=file_seconds,
    )


def _conformance_step(
    ctx: RunContext, recipe: Recipe, env: TorchEnv, build_dir: Path
) -> ConformanceOutcome:
    """The conformance suite against the recipe's device, sandboxed like the tests."""
    work_dir = ctx.run_dir / "conformance"
    with ctx.step(StepName.CONFORMANCE) as (sink, outcomes):
        sandbox = _sandbox_for_suite(ctx, recipe, env, build_dir, work_dir)
        result = run_conformance(
            recipe, env, work_dir, sink,
            timeout_s=ctx.settings.step_timeout_s,
            per_test_timeout_s=ctx.settings.test_timeout_s,
            build_dir=build_dir,
            sandbox=sandbox,
        )
        outcomes.append(result.step)
        if result.mechanisms:
            with session_scope(ctx.engine) as s:
                record_conformance(s, ctx.run_id, result.device, result.mechanisms)
    return result


def _tests_to_rerun(run: Run) -> list[str] | None:
    """The failed tests a rerun repeats (``service.commands.runs.plan_rerun``); None runs the whole
    suite: any other run, or a rerun with no single test to repeat."""
    # Experiments about a breakage repeat the red run's failing tests the same way: a
    # bisection probe (service/commands/bisections.py), a culprit verification on the
    # undone torch (workers/jobs/verify.py).
    tests = (run.trigger_info.get("failed_tests")
             if run.trigger == "rerun" or run.trigger in EXPERIMENTS else None)
    return [str(t) for t in tests] if isinstance(tests, list) and tests else None


__all__ = ["EventSink", "RunEvent", "execute_run"]
