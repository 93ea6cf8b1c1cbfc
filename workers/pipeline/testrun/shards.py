"""A run's test step split into shards that several workers run at once (issue #19).

The run's owner provisions and builds once, then lists the suite's files and, when there
are at least ``test_shard_min_files`` and ``test_shards`` > 1, splits them into shards
(``test_shards`` rows) and sends one ``ootci.run.test_shard`` task per shard. Any worker
that gets one claims the shard (a lease, like a run's), runs ``run_tests`` on the shard's
files only, against the owner's artefact: the torch env and the build dir in the shared
cache dir, named in the shard row. A shard never provisions nor builds: a worker that does
not see the artefact on its disk hands the shard back. The owner runs queued shards too,
takes over any whose lease ran out (its worker died), and merges the shards' records into
the run's one test step and verdict, exactly as the parts of a parallel step are merged.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from service.commands.shards import (
    claim_shard,
    create_shards,
    finish_shard,
    release_shard,
    renew_shard,
    shards_of,
)
from service.config import Settings
from service.db import session_scope
from service.domain.states import Outcome
from service.domain.torch_spec import SourceKind
from service.models import ShardState, TestShard
from workers.pipeline.cache.layout import run_dir as run_dir_of
from workers.pipeline.cache.layout import stamp
from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.isolation.child_env import ChildEnvPolicy, child_environment
from workers.pipeline.isolation.procs import Attempt, ProcResult, attempt_scope, current_attempt
from workers.pipeline.isolation.sandbox import SandboxUnusable, StepSandbox
from workers.pipeline.logs.masking import SecretMasker, masker_for_settings
from workers.pipeline.logs.sink import LogSink
from workers.pipeline.steps.recipe import Recipe, load_recipe
from workers.pipeline.testrun.compile_cache import compile_cache_scope
from workers.pipeline.testrun.parallel import (
    PartResult,
    default_processes,
    keyed_by_path,
    merge,
    partition,
)
from workers.pipeline.testrun.records import TestRecord, TestRunOutcome
from workers.pipeline.testrun.runner import (
    TestRunOptions,
    list_test_files,
    outcome_of,
    run_tests,
)
from workers.pipeline.testrun.suite_sandbox import suite_sandbox

log = logging.getLogger(__name__)

# Sends one shard task per index of a run: the Celery task, or nothing (embedded mode).
ShardDispatch = Callable[[int, list[int]], None]
# A sandbox for a shard's tests, given the dir the shard writes to.
SandboxFor = Callable[[Path], StepSandbox | None]
_LOG_TAIL_LINES = 200  # all a LogSink keeps
_POLL_S = 1.0


@dataclass(frozen=True)
class ShardJob:
    """One claimed shard, detached from the session that claimed it."""

    id: int
    run_id: int
    index: int
    files: list[str]
    all_files: list[str]
    artefact: dict[str, Any]

    @classmethod
    def of(cls, row: TestShard) -> ShardJob:
        return cls(row.id, row.run_id, row.index, list(row.files), list(row.all_files),
                   dict(row.artefact))


def artefact_of(recipe: Recipe, env: TorchEnv, build_dir: Path) -> dict[str, Any]:
    """What a shard needs to test the owner's build: JSON for the shard row."""
    return {
        "source_dir": str(recipe.source_dir),
        "build_dir": str(build_dir),
        "env": {
            "spec": env.spec, "source_kind": env.source_kind.value, "python": str(env.python),
            "version": env.version, "git_version": env.git_version, "env_key": env.env_key,
            "torch_dir": str(env.torch_dir), "pythonpath": [str(p) for p in env.pythonpath],
            "artifact_url": env.artifact_url, "artifact_sha256": env.artifact_sha256,
            "base_dirs": [str(p) for p in env.base_dirs],
        },
    }


def _env_of(artefact: dict[str, Any]) -> TorchEnv:
    e = artefact["env"]
    return TorchEnv(
        spec=e["spec"], source_kind=SourceKind(e["source_kind"]), python=Path(e["python"]),
        version=e["version"], git_version=e["git_version"], env_key=e["env_key"],
        torch_dir=Path(e["torch_dir"]), pythonpath=tuple(Path(p) for p in e["pythonpath"]),
        artifact_url=e["artifact_url"], artifact_sha256=e["artifact_sha256"],
        base_dirs=tuple(Path(p) for p in e.get("base_dirs", ())),
    )


def _missing(artefact: dict[str, Any]) -> str | None:
    """What of the owner's artefact this worker cannot see, or None."""
    for what, path in (("torch env", artefact["env"]["python"]),
                       ("build dir", artefact["build_dir"]),
                       ("backend source", artefact["source_dir"])):
        if not Path(path).exists():
            return f"the {what} {path} is not on this worker's disk"
    return None


def _result_json(outcome: TestRunOutcome, tail: list[str], worker_id: str) -> dict[str, Any]:
    return {
        "records": [
            {"nodeid": r.nodeid, "outcome": str(r.outcome), "duration_s": r.duration_s,
             "message": r.message, "details": r.details}
            for r in outcome.results
        ],
        "exit_code": outcome.step.exit_code,
        "problem": outcome.problem,
        "worker": worker_id,
        "log_tail": tail,
    }


def _part_of(result: dict[str, Any]) -> PartResult:
    records = {
        r["nodeid"]: TestRecord(nodeid=r["nodeid"], outcome=Outcome(r["outcome"]),
                                duration_s=r["duration_s"], message=r["message"],
                                details=r["details"])
        for r in result["records"]
    }
    exit_code = result["exit_code"]
    return PartResult(records, ProcResult(exit_code if exit_code is not None else -1, 0.0),
                      result["problem"])


@contextlib.contextmanager
def _shard_lease(engine: Engine, job: ShardJob, worker_id: str, lease_s: int) -> Iterator[
    threading.Event
]:
    """Renews our lease on the shard while it runs; the event is set once it is lost."""
    lost, stop = threading.Event(), threading.Event()

    def beat() -> None:
        while not stop.wait(min(30.0, lease_s / 4)):
            try:
                with session_scope(engine) as s:
                    if not renew_shard(s, job.id, worker_id, lease_s):
                        lost.set()
                        return
            except Exception:  # the database may be back before the lease runs out
                log.warning("shard %s/%s: cannot renew the lease", job.run_id, job.index,
                            exc_info=True)

    thread = threading.Thread(target=beat, name=f"shard-lease-{job.run_id}-{job.index}",
                              daemon=True)
    thread.start()
    try:
        yield lost
    finally:
        stop.set()
        thread.join(10)


def run_shard(
    engine: Engine,
    settings: Settings,
    job: ShardJob,
    worker_id: str,
    work_dir: Path,
    log_sink: LogSink,
    sandbox_for: SandboxFor,
    masker: SecretMasker | None = None,
) -> bool:
    """Run a claimed shard and store its result. False when this worker cannot (the
    artefact is not on its disk: the shard goes back to the queue) or lost it meanwhile."""
    missing = _missing(job.artefact)
    if missing is not None:
        log_sink.write(f"ootci: shard {job.index}: {missing}; handing it back")
        with session_scope(engine) as s:
            release_shard(s, job.id, worker_id)
        return False
    recipe = load_recipe(Path(job.artefact["source_dir"]))
    shard_dir = work_dir / f"shard-{job.index}"
    mine = set(job.files)
    outer = current_attempt()
    began = time.time()
    with _shard_lease(engine, job, worker_id, settings.run_lease_s) as lost:

        def abort() -> str | None:
            if lost.is_set():
                return "the shard's lease was lost to another worker"
            return outer.abort() if outer is not None else None

        scope = Attempt(abort=abort, groups_file=outer.groups_file if outer else None)
        with attempt_scope(scope):
            outcome = run_tests(
                recipe,
                _env_of(job.artefact),
                shard_dir,
                log_sink,
                TestRunOptions.of_settings(
                    settings,
                    build_dir=Path(job.artefact["build_dir"]),
                    sandbox=sandbox_for(shard_dir),
                    processes=settings.test_processes or default_processes(),
                    masker=masker,
                    ignore_files=[f for f in job.all_files if f not in mine],
                ),
            )
    if lost.is_set():
        return False  # whoever took it over stores its result
    with session_scope(engine) as s:
        return finish_shard(s, job.id, worker_id,
                            {**_result_json(outcome, log_sink.tail(_LOG_TAIL_LINES), worker_id),
                             "began": began, "ended": time.time()})


def run_sharded(
    engine: Engine,
    settings: Settings,
    run_id: int,
    worker_id: str,
    recipe: Recipe,
    env: TorchEnv,
    build_dir: Path,
    work_dir: Path,
    step_log: LogSink,
    *,
    dispatch: ShardDispatch,
    sandbox: StepSandbox | None,
    check_lease: Callable[[], None],
    masker: SecretMasker | None = None,
    file_seconds: Mapping[str, float] | None = None,
) -> TestRunOutcome | None:
    """The owner's side: shard the suite (balanced by ``file_seconds``, as ``run_tests``
    balances its processes), run shards until every one is done, merge.
    None when the suite is too small to shard (the caller runs the usual test step)."""
    files = list_test_files(recipe, env, work_dir / "listing", step_log,
                            build_dir=build_dir, sandbox=sandbox)
    if len(files) < max(2, settings.test_shard_min_files):
        return None
    seconds = keyed_by_path(file_seconds or {}, files, recipe.source_dir)
    parts = partition(files, settings.test_shards, seconds)
    with session_scope(engine) as s:
        indexes = create_shards(s, run_id, parts, artefact_of(recipe, env, build_dir))
    step_log.write(
        f"ootci: {len(files)} test files in {len(parts)} shards for any worker to run: "
        + "; ".join(f"shard {i}: {len(p)} file(s)" for i, p in enumerate(parts))
    )
    try:
        dispatch(run_id, indexes)
    except Exception as exc:  # the broker is down: this worker runs every shard itself
        step_log.write(f"ootci: cannot send the shards to other workers ({exc}); running them here")
    reported: set[int] = set()
    while True:
        check_lease()
        with session_scope(engine) as s:
            rows = shards_of(s, run_id)
            states = {r.index: (r.state, r.claimed_by, r.result) for r in rows}
        for index, (state, _, result) in sorted(states.items()):
            if state == ShardState.DONE and index not in reported and result is not None:
                reported.add(index)
                _report(step_log, index, result, worker_id)
        if all(state == ShardState.DONE for state, _, _ in states.values()):
            break
        if not _run_one(engine, settings, run_id, worker_id, sorted(states), work_dir,
                        step_log, sandbox, masker):
            time.sleep(_POLL_S)
    with session_scope(engine) as s:
        results = [r.result for r in shards_of(s, run_id)]
    merged = merge([_part_of(r) for r in results if r is not None], files)
    return outcome_of(merged, step_log.path)


def _run_one(
    engine: Engine, settings: Settings, run_id: int, worker_id: str, indexes: list[int],
    work_dir: Path, step_log: LogSink, sandbox: StepSandbox | None,
    masker: SecretMasker | None,
) -> bool:
    """Claim and run one shard no live worker holds; False when there is none."""
    for index in indexes:
        with session_scope(engine) as s:
            row = claim_shard(s, run_id, index, worker_id, settings.run_lease_s)
            job = ShardJob.of(row) if row is not None else None
        if job is None:
            continue
        step_log.write(f"ootci: shard {index} runs here ({worker_id})")
        def forward(line: str, shard: int = index) -> None:
            step_log.write(f"[shard {shard}] {line}")

        with LogSink(work_dir / f"shard-{index}.log", masker=masker, on_line=forward) as sink:
            run_shard(engine, settings, job, worker_id, work_dir, sink,
                      lambda _dir: sandbox, masker)
        return True
    return False


def _report(step_log: LogSink, index: int, result: dict[str, Any], owner: str) -> None:
    """A shard another worker ran: its log tail into the step's log (ours streamed live)."""
    worker = result.get("worker")
    if worker == owner:
        return
    step_log.write(f"ootci: shard {index} ran on {worker}; the end of its log:")
    for line in result.get("log_tail", []):
        step_log.write(f"[shard {index}] {line}")


def execute_shard(
    engine: Engine, settings: Settings, run_id: int, index: int, worker_id: str
) -> bool | None:
    """A worker's side (the ``ootci.run.test_shard`` task): claim the shard and run it.
    None when it is not ours to run (done, leased by a live worker, or the run is over)."""
    with session_scope(engine) as s:
        row = claim_shard(s, run_id, index, worker_id, settings.run_lease_s)
        job = ShardJob.of(row) if row is not None else None
    if job is None:
        return None
    run_dir = run_dir_of(settings.resolved_work_dir, run_id)
    stamp(run_dir)  # in use: the cache GC leaves it alone for a day at least
    policy = ChildEnvPolicy.for_run(settings, run_dir / f"shard-{index}-worker")
    masker = masker_for_settings(settings)
    work_dir = run_dir / "test-shards"
    artefact = job.artefact

    def sandbox_for(shard_dir: Path) -> StepSandbox:
        return suite_sandbox(settings, policy, _env_of(artefact),
                             build_dir=Path(artefact["build_dir"]),
                             source_dir=Path(artefact["source_dir"]),
                             work_dir=shard_dir, run_dir=run_dir)

    work_dir.mkdir(parents=True, exist_ok=True)
    with (
        LogSink(work_dir / f"shard-{index}.log", masker=masker) as sink,
        attempt_scope(Attempt(groups_file=work_dir / f"shard-{index}.process-groups")),
        child_environment(policy),
        compile_cache_scope(run_dir),  # the owner's and this worker's other shards' too
    ):
        sink.write(f"ootci: shard {index} of run {run_id} on {worker_id}")
        try:
            return run_shard(engine, settings, job, worker_id, work_dir, sink, sandbox_for,
                             masker)
        except SandboxUnusable as exc:
            # This worker cannot seal the shard's tests: its trouble, not the run's. The
            # shard goes back now, not when its lease runs out, and the owner, which sealed
            # the build on its own disk, runs it (or ends the run as infra if it cannot).
            sink.write(f"{exc}; handing shard {index} back")
            with session_scope(engine) as s:
                release_shard(s, job.id, worker_id)
            return False
