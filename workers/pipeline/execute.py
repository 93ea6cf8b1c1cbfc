"""Run one compatibility run end to end: claim -> provision -> build -> test -> collect.

This is the only pipeline module that touches the database. Each step's row is committed
when it starts (with the path its log streams to) and again when it ends (with the log
stored compressed), so a run killed at any point keeps everything it had and stays
re-claimable once its lease expires.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, delete
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session

from service.commands.conformance import record_conformance
from service.commands.log_chunks import drop_log_chunks
from service.commands.runs import claim_run, renew_lease, requeue_for_retry, retry_delay_s
from service.commands.torch_builds import record_artifact
from service.config import Settings
from service.db import session_scope
from service.domain.states import StepStatus as OutcomeStatus
from service.domain.torch_spec import SourceKind, TorchSpec
from service.models import (
    Backend,
    ConformanceResult,
    Failure,
    Run,
    RunState,
    Step,
    StepName,
    StepStatus,
    TestResult,
    utcnow,
)
from service.queries.conformance import previously_working
from service.queries.test_timings import seconds_per_file
from service.queries.torch_builds import NoRecordedTorch, recorded_torch
from workers.pipeline import collect
from workers.pipeline.build import build
from workers.pipeline.cache_gc import build_dir as cache_build_dir
from workers.pipeline.cache_gc import collect_garbage_per_settings, stamp
from workers.pipeline.cache_gc import run_dir as run_dir_of
from workers.pipeline.child_env import ChildEnvPolicy, child_environment
from workers.pipeline.commit_dates import commit_date
from workers.pipeline.conformance import ConformanceOutcome, run_conformance
from workers.pipeline.logsink import LogSink
from workers.pipeline.logstream import LogStream
from workers.pipeline.masking import SecretMasker, settings_secrets
from workers.pipeline.procs import Attempt, attempt_scope, child_env, reap_groups
from workers.pipeline.provision import provision
from workers.pipeline.pytest_plugin import PLUGIN_DIR
from workers.pipeline.recipe import load_recipe
from workers.pipeline.resolve import parse_spec
from workers.pipeline.run_env import private_env, shared_read_only
from workers.pipeline.sandbox import (
    StepSandbox,
    probe,
    sandbox_for_build,
    sandbox_for_tests,
    shield_worker_environ,
)
from workers.pipeline.shards import ShardDispatch, run_sharded
from workers.pipeline.source_tree import RunTree, Source, run_tree
from workers.pipeline.testing import run_tests
from workers.pipeline.testing_parallel import default_processes
from workers.pipeline.types import (
    PipelineError,
    Recipe,
    SpecError,
    StepOutcome,
    TestRunOutcome,
    TorchEnv,
    TorchUnusable,
)

log = logging.getLogger(__name__)

LEASE_RENEW_EVERY_S = 30.0
_DB_RETRY_EVERY_S = 1.0


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


def infra_reason(exc: BaseException) -> str | None:
    """Why ``exc`` is the machine's fault rather than the backend's or the user's (so the
    attempt is retried), or None."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"disk full: {exc}"
    if isinstance(exc, OperationalError) or (
        isinstance(exc, DBAPIError) and exc.connection_invalidated
    ):
        first = str(exc.orig or exc).strip().splitlines()
        return f"database unreachable: {first[0] if first else type(exc).__name__}"
    return None


class _Heartbeat:
    """Renews the run's lease on its own timer, apart from the log: a step that prints
    nothing for an hour keeps its lease, and a database outage only costs missed beats (the
    lease outlives them). Sets ``lost`` when the run is no longer ours."""

    def __init__(self, engine: Engine, run_id: int, worker_id: str, lease_s: int) -> None:
        self._engine = engine
        self._run_id = run_id
        self._worker_id = worker_id
        self._lease_s = lease_s
        self.every_s = min(LEASE_RENEW_EVERY_S, lease_s / 4)
        self.lost = threading.Event()
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"lease-{run_id}", daemon=True)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def beat(self) -> None:
        try:
            with session_scope(self._engine) as s:
                if not renew_lease(s, self._run_id, self._worker_id, self._lease_s):
                    self.lost.set()
            self.last_error = None
        except Exception as exc:
            # Keep beating: the database may be back before the lease runs out.
            self.last_error = infra_reason(exc) or repr(exc)
            log.warning("run %s: cannot renew the lease: %s", self._run_id, self.last_error)

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s) and not self.lost.is_set():
            self.beat()

    def abort_reason(self) -> str | None:
        return "the run's lease was lost to another worker" if self.lost.is_set() else None


class _RunContext:
    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        run_id: int,
        worker_id: str,
        on_event: EventSink,
        only_tests: list[str] | None,
        attempt: int = 1,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.run_id = run_id
        self.worker_id = worker_id
        self.on_event = on_event
        self.run_dir = run_dir_of(settings.resolved_work_dir, run_id)
        # Every child of this run starts from this environment (HOME and TMPDIR in the run
        # dir, only the allowed variables), and every log line is masked.
        self.child_policy = ChildEnvPolicy.for_run(settings, self.run_dir)
        self.masker = SecretMasker.from_environ(os.environ, extra=settings_secrets(settings))
        self.only_tests = only_tests  # a rerun's failed tests; None = the whole suite
        self.attempt = attempt
        self.heartbeat = _Heartbeat(engine, run_id, worker_id, settings.run_lease_s)
        self.db_tolerance_s = float(settings.db_outage_tolerance_s)
        # Sends the test shards of a large suite to other workers (shards.py); None: the
        # test step stays on this worker (embedded mode, or no broker).
        self.dispatch_shards: ShardDispatch | None = None

    def log_name(self, name: StepName) -> str:
        """Each attempt its own log: a retry never appends to (nor classifies) an earlier one."""
        return f"{name.value}.log" if self.attempt <= 1 else f"{name.value}.attempt{self.attempt}.log"

    def check_lease(self) -> None:
        if self.heartbeat.lost.is_set():
            raise _Lost()

    def write(self, change: Callable[[Session], None]) -> None:
        """Commit ``change``, waiting out a database outage (up to ``db_tolerance_s``)."""
        deadline = time.monotonic() + self.db_tolerance_s
        while True:
            try:
                with session_scope(self.engine) as s:
                    change(s)
                return
            except (OperationalError, DBAPIError) as exc:
                reason = infra_reason(exc)
                if reason is None or time.monotonic() >= deadline:
                    raise
                log.warning("run %s: %s; retrying", self.run_id, reason)
                time.sleep(_DB_RETRY_EVERY_S)

    @contextmanager
    def step(self, name: StepName) -> Iterator[tuple[LogSink, list[StepOutcome]]]:
        """Open a step: a committed row + a streaming log; the caller appends its outcome.
        The row is closed whatever happens inside (a full disk, a database outage)."""
        self.check_lease()
        stamp(self.run_dir)  # in use: the cache GC leaves it alone for a day at least
        log_path = self.run_dir / self.log_name(name)
        started = utcnow()
        step_ids: list[int] = []

        def open_row(s: Session) -> None:
            row = Step(
                run_id=self.run_id,
                attempt=self.attempt,
                name=name,
                status=StepStatus.RUNNING,
                started_at=started,
                log_path=str(log_path),
            )
            s.add(row)
            s.flush()
            step_ids[:] = [row.id]

        self.write(open_row)
        self._emit(RunEvent(self.run_id, "step", name.value, StepStatus.RUNNING))

        def on_line(line: str) -> None:
            self._emit(RunEvent(self.run_id, "line", name.value, text=line))

        # What the sink writes is also streamed to the database: readers on other machines.
        stream = LogStream(self.engine, step_ids[0])
        sink = LogSink(log_path, on_line=on_line, masker=self.masker,
                       max_bytes=self.settings.step_log_max_mb * 1024 * 1024,
                       on_bytes=stream.append)
        outcomes: list[StepOutcome] = []
        status = StepStatus.ERRORED
        summary = ""
        exit_code: int | None = None
        try:
            yield sink, outcomes
            if sink.write_error is not None:
                raise PipelineError(f"disk full: cannot write the {name.value} log: {sink.write_error}")
            self.check_lease()
            if outcomes:
                status = StepStatus(outcomes[-1].status.value)
                summary = outcomes[-1].summary
                exit_code = outcomes[-1].exit_code
            else:
                status = StepStatus.PASSED
        except _Lost:
            summary = "the run's lease was lost to another worker"
            raise
        except PipelineError as exc:
            summary = str(exc)
            self._log_quietly(sink, f"ootci: {exc}\n")
            raise
        except Exception as exc:
            reason = infra_reason(exc)
            summary = reason or "ootci internal error (traceback in the log)"
            self._log_quietly(sink, traceback.format_exc())
            if reason is not None:
                raise PipelineError(reason) from exc
            raise
        finally:
            sink.close()
            stream.close()
            self._close_step(step_ids[0], name, log_path, status, summary, exit_code)

    def _close_step(
        self,
        step_id: int,
        name: StepName,
        log_path: Path,
        status: StepStatus,
        summary: str,
        exit_code: int | None,
    ) -> None:
        if self.heartbeat.lost.is_set():
            return  # the run is another worker's now: its attempt owns the rows
        finished = utcnow()
        try:
            log_bytes = log_path.read_bytes() if log_path.exists() else b""
        except OSError:
            log_bytes = b""

        def close(s: Session) -> None:
            row = s.get(Step, step_id)
            if row is None:  # the run was deleted meanwhile
                return
            row.status = status
            row.finished_at = finished
            row.duration_s = (finished - row.started_at).total_seconds() if row.started_at else None
            row.exit_code = exit_code
            row.summary = summary[:2000]
            row.store_log(log_bytes)
            drop_log_chunks(s, step_id)

        self.write(close)
        self._emit(RunEvent(self.run_id, "step", name.value, status, summary))

    def _emit(self, event: RunEvent) -> None:
        """Progress display only: its failure never reaches the step."""
        try:
            self.on_event(event)
        except Exception:
            log.exception("run %s: progress display failed", self.run_id)

    @staticmethod
    def _log_quietly(sink: LogSink, text: str) -> None:
        try:
            sink.write(text)
        except Exception:
            log.warning("cannot write to %s: %s", sink.path, text.strip()[:500])


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
    with session_scope(engine) as s:
        if not claim_run(s, run_id, worker_id, settings.run_lease_s):
            return None
        run = s.get_one(Run, run_id)
        if run.attempts > 1:
            # An earlier attempt failed or its worker died: start over from a clean slate.
            # Its steps stay (tagged with their attempt) as the history the run page folds.
            for model in (Failure, TestResult, ConformanceResult):
                s.execute(delete(model).where(model.run_id == run_id))
        backend = s.get_one(Backend, run.backend_id)
        spec_text = run.torch_spec
        source = Source(backend.name, backend.source, backend.ref, backend.subdir)
        pinned_sha = run.backend_sha
        only_tests = _tests_to_rerun(run)
        attempt = run.attempts

    ctx = _RunContext(
        engine, settings, run_id, worker_id, on_event or _ignore, only_tests, attempt=attempt
    )
    ctx.dispatch_shards = dispatch_shards
    groups_file = ctx.run_dir / "process-groups"
    if attempt > 1:
        # What a killed earlier attempt left running would build beside this one.
        reaped = reap_groups(groups_file)
        if reaped:
            log.warning("run %s: killed groups of attempt %s: %s", run_id, attempt - 1, reaped)
    if settings.sandbox:
        probe(settings.sandbox_uid)  # once per worker process: logs what the machine supports
        shield_worker_environ()
    try:
        ctx.run_dir.mkdir(parents=True, exist_ok=True)
        with (
            ctx.heartbeat,
            attempt_scope(Attempt(abort=ctx.heartbeat.abort_reason, groups_file=groups_file)),
            child_environment(ctx.child_policy),
        ):
            state = _pipeline(ctx, spec_text, source, pinned_sha)
    except _Lost:
        log.warning("run %s: lease lost to another worker; stopping", run_id)
        return None
    except Exception as raised:
        exc = _as_pipeline_error(raised)
        if exc is None:
            log.exception("run %s: internal error", run_id)
            state = _finish(ctx, RunState.ERRORED, error=f"internal error: {raised!r}")
            ctx.on_event(RunEvent(run_id, "done", "", state.value))
            return state.value
        error = f"{exc.kind} error: {exc}"
        if retry_infra and exc.kind == "infra":
            if _requeue_for_retry(ctx, exc):
                ctx.on_event(RunEvent(run_id, "done", "", RunState.QUEUED.value))
                return RunState.QUEUED.value
            error = f"infra error on the last of {1 + settings.infra_retries} attempts: {exc}"
        state = _finish(ctx, RunState.ERRORED, error=error)
    ctx.on_event(RunEvent(run_id, "done", "", state.value))
    return state.value


def _as_pipeline_error(exc: BaseException) -> PipelineError | None:
    """The pipeline's own errors, and the machine's faults met anywhere (a full disk, the
    database gone longer than a write waits) as infra; None for a bug of ootci's."""
    if isinstance(exc, PipelineError):
        return exc
    reason = infra_reason(exc)
    return PipelineError(reason) if reason is not None else None


def _pipeline(ctx: _RunContext, spec_text: str, source: Source, pinned_sha: str | None) -> RunState:
    # Built and tested in the run's own tree, never in the registered source (issue #14).
    with run_tree(ctx.settings.resolved_cache_dir, source, pinned_sha=pinned_sha) as tree:
        return _pipeline_in(ctx, spec_text, tree)


def _pipeline_in(ctx: _RunContext, spec_text: str, tree: RunTree) -> RunState:
    settings = ctx.settings
    recipe = load_recipe(tree.path)
    with session_scope(ctx.engine) as s:
        backend = s.get_one(Backend, s.get_one(Run, ctx.run_id).backend_id)
        backend.recipe = _recipe_summary(recipe)
        s.get_one(Run, ctx.run_id).backend_sha = tree.sha

    _collect_cache_garbage(ctx)
    env = _provision_step(ctx, spec_text)
    if isinstance(env, StepOutcome):  # torch itself does not import: nothing to build
        with ctx.step(StepName.COLLECT) as (sink, _), session_scope(ctx.engine) as s:
            run = s.get_one(Run, ctx.run_id)
            state = collect.collect(s, run, None, None, settings, sink.write, provision=env)
            run.transition(state)
        return state
    build_dir = _build_dir(ctx, recipe, env, tree.key)
    stamp(build_dir)
    build_outcome = _build_step(ctx, recipe, env, build_dir)
    tests: TestRunOutcome | None = None
    conformance: ConformanceOutcome | None = None
    if build_outcome.status is OutcomeStatus.PASSED:
        tests = _test_step(ctx, recipe, env, build_dir)
        if recipe.conformance_device is not None:
            conformance = _conformance_step(ctx, recipe, env, build_dir)

    with ctx.step(StepName.COLLECT) as (sink, _), session_scope(ctx.engine) as s:
        run = s.get_one(Run, ctx.run_id)
        if tests is not None and conformance is not None:
            tests = _with_regressions(s, run, tests, conformance, sink)
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


def _provision_step(ctx: _RunContext, spec_text: str) -> TorchEnv | StepOutcome:
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
        committed = commit_date(settings, spec.commit, sink) if spec.kind is SourceKind.COMMIT else None
        try:
            base = provision(spec, settings.resolved_cache_dir, sink, commit_date=committed,
                             package_cache=settings.resolved_package_cache_dir)
        except TorchUnusable as exc:
            sink.write(f"ootci: {exc}\n")
            outcomes.append(StepOutcome(OutcomeStatus.FAILED, None, str(exc)[:2000], sink.path))
            return outcomes[-1]
        sink.write(f"ootci: torch {base.version} ({base.git_version}) at {base.torch_dir}\n")
        env = private_env(base, ctx.run_dir)
        sink.write(f"ootci: the run's own env {_venv_dir(env)} over {_venv_dir(base)} (read-only)\n")
        with session_scope(ctx.engine) as s:
            tb = collect.upsert_torch_build(s, base)
            record_artifact(tb, base.artifact_url, base.artifact_sha256)
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


def _build_dir(ctx: _RunContext, recipe: Recipe, env: TorchEnv, key: str) -> Path:
    """One build dir per (torch build, backend source): reused by a rerun of the same pair."""
    return cache_build_dir(ctx.settings.resolved_cache_dir, recipe.name, env.env_key, key)


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
            # The build installs into the run's private env, never into the shared base, from
            # the run's own copy of the source (source_tree.py), never the registered tree.
            writable=[*own, _venv_dir(env), recipe.source_dir, *([Path(ccache)] if ccache else [])],
            visible=[*env.pythonpath, ctx.run_dir],
            watched=own,
            read_only=shared_read_only(ctx.settings, env),
        )
        outcome = build(
            recipe, env, build_dir, sink, timeout_s=ctx.settings.step_timeout_s, sandbox=sandbox
        )
        outcomes.append(outcome)
    return outcome


def _suite_sandbox(
    ctx: _RunContext, recipe: Recipe, env: TorchEnv, build_dir: Path, work_dir: Path
) -> StepSandbox:
    """Where a suite (the backend's own or the conformance suite) runs: it sees the run's
    env over its read-only base, the build and the source; it writes only its own dirs."""
    policy = ctx.child_policy
    own = [policy.home, policy.tmpdir, work_dir]
    return sandbox_for_tests(
        ctx.settings,
        writable=own,
        visible=[
            _venv_dir(env), *env.base_dirs, *env.pythonpath, build_dir, recipe.source_dir,
            PLUGIN_DIR, ctx.run_dir,
        ],
        watched=own,
        read_only=shared_read_only(ctx.settings, env),
    )


def _test_step(
    ctx: _RunContext, recipe: Recipe, env: TorchEnv, build_dir: Path
) -> TestRunOutcome:
    with ctx.step(StepName.TEST) as (sink, outcomes):
        sandbox = _suite_sandbox(ctx, recipe, env, build_dir, ctx.run_dir / "test")
        file_seconds = _file_seconds(ctx)
        sharded = _sharded_tests(ctx, recipe, env, build_dir, sink, sandbox, file_seconds)
        result = sharded or run_tests(
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
            processes=ctx.settings.test_processes or default_processes(),
            masker=ctx.masker,
            file_seconds=file_seconds,
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


def _file_seconds(ctx: _RunContext) -> dict[str, float]:
    with session_scope(ctx.engine) as s:
        return seconds_per_file(s, s.get_one(Run, ctx.run_id))


def _sharded_tests(
    ctx: _RunContext,
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
    ctx: _RunContext, recipe: Recipe, env: TorchEnv, build_dir: Path
) -> ConformanceOutcome:
    """The conformance suite against the recipe's device, sandboxed like the tests."""
    work_dir = ctx.run_dir / "conformance"
    with ctx.step(StepName.CONFORMANCE) as (sink, outcomes):
        sandbox = _suite_sandbox(ctx, recipe, env, build_dir, work_dir)
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


def _with_regressions(
    session: Session, run: Run, tests: TestRunOutcome, conformance: ConformanceOutcome,
    sink: LogSink,
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
    sink.write(f"ootci: conformance regressions: {', '.join(sorted(regressed))}\n")
    extra = tuple(r for r in conformance.records if r.nodeid in failing)
    return TestRunOutcome(step=tests.step, results=(*tests.results, *extra))


def _tests_to_rerun(run: Run) -> list[str] | None:
    """The failed tests a rerun repeats (``service.commands.runs.plan_rerun``); None runs the whole
    suite: any other run, or a rerun with no single test to repeat."""
    tests = run.trigger_info.get("failed_tests") if run.trigger == "rerun" else None
    return [str(t) for t in tests] if isinstance(tests, list) and tests else None


def _requeue_for_retry(ctx: _RunContext, exc: PipelineError) -> bool:
    """Back to the queue if the retry budget allows another attempt (and the run is still
    ours); its failed steps stay, as that attempt's history, when the next one starts."""
    delays: list[int] = []

    def requeue(s: Session) -> None:
        run = s.get_one(Run, ctx.run_id)
        budget = 1 + ctx.settings.infra_retries
        if run.attempts >= budget or run.claimed_by != ctx.worker_id:
            return
        delay = retry_delay_s(run.attempts, ctx.settings.infra_retry_delay_s)
        requeue_for_retry(
            s, run, delay_s=delay,
            error=f"infra error on attempt {run.attempts} of {budget}, retrying in {delay} s: {exc}",
        )
        delays.append(delay)

    ctx.write(requeue)
    if not delays:
        return False
    log.warning("run %s: infra error, retrying in %s s: %s", ctx.run_id, delays[0], exc)
    return True


def _finish(ctx: _RunContext, state: RunState, *, error: str) -> RunState:
    def finish(s: Session) -> None:
        run = s.get_one(Run, ctx.run_id)
        if run.claimed_by != ctx.worker_id:
            return  # another attempt owns the run now
        run.error = error[:4000]
        run.verdict = "infra" if "infra" in error else "unknown"
        run.verdict_reason = error[:4000]
        if RunState(run.state) is RunState.RUNNING:
            run.transition(state)

    ctx.write(finish)
    return state


def _recipe_summary(recipe: Recipe) -> dict[str, object]:
    return {
        "name": recipe.name,
        "build": list(recipe.build_command),
        "test": list(recipe.test_command),
        "timeout_per_test": recipe.timeout_per_test_s,
    }


__all__ = ["EventSink", "RunEvent", "execute_run"]
