"""Run one compatibility run end to end: claim -> provision -> build -> test -> collect.

This is the only pipeline module that touches the database. Each step's row is committed
when it starts (with the path its log streams to) and again when it ends (with the log
stored compressed), so a run killed at any point keeps everything it had and stays
re-claimable once its lease expires.
"""

from __future__ import annotations

import logging
import os
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, delete

from service.commands.runs import claim_run, renew_lease, requeue_for_retry, retry_delay_s
from service.commands.torch_builds import record_artifact
from service.config import Settings
from service.db import session_scope
from service.domain.states import StepStatus as OutcomeStatus
from service.domain.torch_spec import SourceKind, TorchSpec
from service.models import (
    Backend,
    Failure,
    Run,
    RunState,
    Step,
    StepName,
    StepStatus,
    TestResult,
    utcnow,
)
from service.queries.torch_builds import NoRecordedTorch, recorded_torch
from workers.pipeline import collect
from workers.pipeline.backend_source import backend_sha, source_key
from workers.pipeline.build import build
from workers.pipeline.cache_gc import build_dir as cache_build_dir
from workers.pipeline.cache_gc import collect_garbage_per_settings, stamp
from workers.pipeline.child_env import ChildEnvPolicy, child_environment
from workers.pipeline.commit_dates import commit_date
from workers.pipeline.logsink import LogSink
from workers.pipeline.masking import SecretMasker, settings_secrets
from workers.pipeline.procs import child_env
from workers.pipeline.provision import provision
from workers.pipeline.pytest_plugin import PLUGIN_DIR
from workers.pipeline.recipe import load_recipe
from workers.pipeline.resolve import parse_spec
from workers.pipeline.sandbox import (
    probe,
    sandbox_for_build,
    sandbox_for_tests,
    shield_worker_environ,
)
from workers.pipeline.testing import run_tests
from workers.pipeline.types import (
    PipelineError,
    Recipe,
    SpecError,
    StepOutcome,
    TestRunOutcome,
    TorchEnv,
)

log = logging.getLogger(__name__)

LEASE_RENEW_EVERY_S = 30.0


@dataclass(frozen=True)
class RunEvent:
    """Progress of a run, for CLI progress bars and logs. kind: step | line | done."""

    run_id: int
    kind: str
    step: str
    status: str = ""
    text: str = ""


EventSink = Callable[[RunEvent], None]


def _ignore(_event: RunEvent) -> None:
    pass


class _Lost(Exception):
    """Another worker took the run over (our lease expired): stop without writing more."""


class _RunContext:
    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        run_id: int,
        worker_id: str,
        on_event: EventSink,
        only_tests: list[str] | None,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.run_id = run_id
        self.worker_id = worker_id
        self.on_event = on_event
        self.run_dir = settings.resolved_work_dir / "runs" / str(run_id)
        # Every child of this run starts from this environment (HOME and TMPDIR in the run
        # dir, only the allowed variables), and every log line is masked.
        self.child_policy = ChildEnvPolicy.for_run(settings, self.run_dir)
        self.masker = SecretMasker.from_environ(os.environ, extra=settings_secrets(settings))
        self._last_renew = time.monotonic()
        self.only_tests = only_tests  # a rerun's failed tests; None = the whole suite

    def renew(self) -> None:
        """Keep the lease alive while a long step runs (throttled)."""
        if time.monotonic() - self._last_renew < LEASE_RENEW_EVERY_S:
            return
        self._last_renew = time.monotonic()
        with session_scope(self.engine) as s:
            if not renew_lease(s, self.run_id, self.worker_id, self.settings.run_lease_s):
                raise _Lost()

    @contextmanager
    def step(self, name: StepName) -> Iterator[tuple[LogSink, list[StepOutcome]]]:
        """Open a step: a committed row + a streaming log; the caller appends its outcome."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.run_dir / f"{name.value}.log"
        started = utcnow()
        with session_scope(self.engine) as s:
            row = Step(
                run_id=self.run_id,
                name=name,
                status=StepStatus.RUNNING,
                started_at=started,
                log_path=str(log_path),
            )
            s.add(row)
            s.flush()
            step_id = row.id
        self.on_event(RunEvent(self.run_id, "step", name.value, StepStatus.RUNNING))

        def on_line(line: str) -> None:
            self.on_event(RunEvent(self.run_id, "line", name.value, text=line))
            self.renew()

        sink = LogSink(log_path, on_line=on_line, masker=self.masker,
                       max_bytes=self.settings.step_log_max_mb * 1024 * 1024)
        outcomes: list[StepOutcome] = []
        status = StepStatus.ERRORED
        summary = ""
        exit_code: int | None = None
        try:
            yield sink, outcomes
            if outcomes:
                status = StepStatus(outcomes[-1].status.value)
                summary = outcomes[-1].summary
                exit_code = outcomes[-1].exit_code
            else:
                status = StepStatus.PASSED
        except _Lost:
            raise
        except PipelineError as exc:
            summary = str(exc)
            sink.write(f"ootci: {exc}\n")
            raise
        except Exception:
            summary = "ootci internal error (traceback in the log)"
            sink.write(traceback.format_exc())
            raise
        finally:
            sink.close()
            finished = utcnow()
            with session_scope(self.engine) as s:
                row = s.get_one(Step, step_id)
                row.status = status
                row.finished_at = finished
                row.duration_s = (finished - started).total_seconds()
                row.exit_code = exit_code
                row.summary = summary[:2000]
                row.store_log(log_path.read_bytes() if log_path.exists() else b"")
            self.on_event(RunEvent(self.run_id, "step", name.value, status, summary))


def execute_run(
    engine: Engine,
    settings: Settings,
    run_id: int,
    worker_id: str,
    *,
    on_event: EventSink | None = None,
    retry_infra: bool = False,
) -> str | None:
    """Execute a queued run. Returns the final state, or None when the run was not ours to
    take (already finished, leased by another live worker, or waiting for its retry time).
    Pipeline failures are recorded on the run, never raised: the run ends ``failed`` (the
    backend or upstream broke) or ``errored`` (bad input or infrastructure).

    With ``retry_infra`` (the workers), an attempt that failed on infrastructure while
    ``settings.infra_retries`` allows another puts the run back in the queue with a backoff
    (``runs.retry_at``) and returns ``queued``: the caller schedules the retry. An
    interactive ``ootci run`` reports the failure at once instead."""
    with session_scope(engine) as s:
        if not claim_run(s, run_id, worker_id, settings.run_lease_s):
            return None
        run = s.get_one(Run, run_id)
        if run.attempts > 1:
            # A previous worker died mid-run: start over from a clean slate.
            for model in (Failure, TestResult, Step):
                s.execute(delete(model).where(model.run_id == run_id))
        backend = s.get_one(Backend, run.backend_id)
        spec_text, source = run.torch_spec, backend.source
        only_tests = _tests_to_rerun(run)

    ctx = _RunContext(engine, settings, run_id, worker_id, on_event or _ignore, only_tests)
    if settings.sandbox:
        probe(settings.sandbox_uid)  # once per worker process: logs what the machine supports
        shield_worker_environ()
    try:
        with child_environment(ctx.child_policy):
            state = _pipeline(ctx, spec_text, Path(source))
    except _Lost:
        log.warning("run %s: lease lost to another worker; stopping", run_id)
        return None
    except PipelineError as exc:
        error = f"{exc.kind} error: {exc}"
        if retry_infra and exc.kind == "infra":
            if _requeue_for_retry(ctx, exc):
                ctx.on_event(RunEvent(run_id, "done", "", RunState.QUEUED.value))
                return RunState.QUEUED.value
            error = f"infra error on the last of {1 + settings.infra_retries} attempts: {exc}"
        state = _finish(ctx, RunState.ERRORED, error=error)
    except Exception as exc:
        log.exception("run %s: internal error", run_id)
        state = _finish(ctx, RunState.ERRORED, error=f"internal error: {exc!r}")
    ctx.on_event(RunEvent(run_id, "done", "", state.value))
    return state.value


def _pipeline(ctx: _RunContext, spec_text: str, source: Path) -> RunState:
    settings = ctx.settings
    recipe = load_recipe(source)
    with session_scope(ctx.engine) as s:
        backend = s.get_one(Backend, s.get_one(Run, ctx.run_id).backend_id)
        backend.recipe = _recipe_summary(recipe)
        sha = backend_sha(source)
        s.get_one(Run, ctx.run_id).backend_sha = sha

    _collect_cache_garbage(ctx)
    env = _provision_step(ctx, spec_text)
    build_dir = _build_dir(ctx, recipe, env)
    stamp(build_dir)
    build_outcome = _build_step(ctx, recipe, env, build_dir)
    tests: TestRunOutcome | None = None
    if build_outcome.status is OutcomeStatus.PASSED:
        tests = _test_step(ctx, recipe, env, build_dir)

    with ctx.step(StepName.COLLECT) as (sink, _), session_scope(ctx.engine) as s:
        run = s.get_one(Run, ctx.run_id)
        state = collect.collect(s, run, build_outcome, tests, settings, sink.write)
        run.transition(state)
    return state


def _collect_cache_garbage(ctx: _RunContext) -> None:
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


def _provision_step(ctx: _RunContext, spec_text: str) -> TorchEnv:
    settings = ctx.settings
    with ctx.step(StepName.PROVISION) as (sink, _):
        spec = parse_spec(
            spec_text,
            nightly_index_url=settings.nightly_index_url,
            pip_index_url=settings.pip_index_url,
        )
        if spec.kind is SourceKind.RUN:
            spec = _pinned_to_recorded_wheel(ctx, spec, sink)
        committed = commit_date(settings, spec.commit, sink) if spec.kind is SourceKind.COMMIT else None
        env = provision(spec, settings.resolved_cache_dir, sink, commit_date=committed)
        sink.write(f"ootci: torch {env.version} ({env.git_version}) at {env.torch_dir}\n")
        with session_scope(ctx.engine) as s:
            tb = collect.upsert_torch_build(s, env)
            record_artifact(tb, env.artifact_url, env.artifact_sha256)
            s.get_one(Run, ctx.run_id).torch_build_id = tb.id
    return env


def _pinned_to_recorded_wheel(ctx: _RunContext, spec: TorchSpec, sink: LogSink) -> TorchSpec:
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


def _build_dir(ctx: _RunContext, recipe: Recipe, env: TorchEnv) -> Path:
    """One build dir per (torch build, backend source): reused by a rerun of the same pair."""
    return cache_build_dir(
        ctx.settings.resolved_cache_dir, recipe.name, env.env_key, source_key(recipe.source_dir)
    )


def _venv_dir(env: TorchEnv) -> Path:
    return env.python.parent.parent  # <venv>/bin/python


def _build_step(ctx: _RunContext, recipe: Recipe, env: TorchEnv, build_dir: Path) -> StepOutcome:
    policy = ctx.child_policy
    # ccache keeps its default, machine-wide dir: every env and build dir shares it.
    ccache = child_env({}).get("CCACHE_DIR")
    own = [policy.home, policy.tmpdir, build_dir]
    with ctx.step(StepName.BUILD) as (sink, outcomes):
        sandbox = sandbox_for_build(
            ctx.settings,
            # The build still installs into the shared torch env and writes into the source
            # tree (issue #14 item 2 gives each run its own).
            writable=[*own, _venv_dir(env), recipe.source_dir, *([Path(ccache)] if ccache else [])],
            visible=[*env.pythonpath, ctx.run_dir],
            watched=own,
        )
        outcome = build(
            recipe, env, build_dir, sink, timeout_s=ctx.settings.step_timeout_s, sandbox=sandbox
        )
        outcomes.append(outcome)
    return outcome


def _test_step(
    ctx: _RunContext, recipe: Recipe, env: TorchEnv, build_dir: Path
) -> TestRunOutcome:
    policy = ctx.child_policy
    own = [policy.home, policy.tmpdir, ctx.run_dir / "test"]
    with ctx.step(StepName.TEST) as (sink, outcomes):
        sandbox = sandbox_for_tests(
            ctx.settings,
            writable=own,
            visible=[
                _venv_dir(env), *env.pythonpath, build_dir, recipe.source_dir, PLUGIN_DIR,
                ctx.run_dir,
            ],
            watched=own,
        )
        result = run_tests(
            recipe,
            env,
            ctx.run_dir / "test",
            sink,
            timeout_s=ctx.settings.step_timeout_s,
            per_test_timeout_s=ctx.settings.test_timeout_s,
            rerun_failures=ctx.settings.rerun_failed_tests,
            build_dir=build_dir,
            only=ctx.only_tests,
            sandbox=sandbox,
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


def _tests_to_rerun(run: Run) -> list[str] | None:
    """The failed tests a rerun repeats (``service.commands.runs.plan_rerun``); None runs the whole
    suite: any other run, or a rerun with no single test to repeat."""
    tests = run.trigger_info.get("failed_tests") if run.trigger == "rerun" else None
    return [str(t) for t in tests] if isinstance(tests, list) and tests else None


def _requeue_for_retry(ctx: _RunContext, exc: PipelineError) -> bool:
    """Back to the queue if the retry budget allows another attempt (and the run is still
    ours); its failed steps stay visible until the next attempt starts over."""
    with session_scope(ctx.engine) as s:
        run = s.get_one(Run, ctx.run_id)
        budget = 1 + ctx.settings.infra_retries
        if run.attempts >= budget or run.claimed_by != ctx.worker_id:
            return False
        delay = retry_delay_s(run.attempts, ctx.settings.infra_retry_delay_s)
        requeue_for_retry(
            s, run, delay_s=delay,
            error=f"infra error on attempt {run.attempts} of {budget}, retrying in {delay} s: {exc}",
        )
    log.warning("run %s: infra error, retrying in %s s: %s", ctx.run_id, delay, exc)
    return True


def _finish(ctx: _RunContext, state: RunState, *, error: str) -> RunState:
    with session_scope(ctx.engine) as s:
        run = s.get_one(Run, ctx.run_id)
        run.error = error[:4000]
        run.verdict = "infra" if "infra" in error else "unknown"
        run.verdict_reason = error[:4000]
        if RunState(run.state) is RunState.RUNNING:
            run.transition(state)
    return state


def _recipe_summary(recipe: Recipe) -> dict[str, object]:
    return {
        "name": recipe.name,
        "build": list(recipe.build_command),
        "test": list(recipe.test_command),
        "timeout_per_test": recipe.timeout_per_test_s,
    }


__all__ = ["EventSink", "RunEvent", "execute_run"]
