"""The test step: run a backend's pytest suite with crash isolation.

Our plugin (``pytest_plugin/ootci_pytest_plugin.py``) writes a ``started`` line before each
test and a ``finished`` line after it to ``<work_dir>/results.jsonl``. When pytest dies (a
segfault in the backend, an abort, a per-test timeout) the test that started and never
finished is the one that killed it: it is recorded as ``crashed`` and pytest is started
again with every recorded test deselected, so one bad kernel costs one result, not the
suite; a storm of alike crashes ends the restarts (``restarts.py``). Failures are then
rerun once in a fresh process; a pass there makes them ``flaky``.

The JSONL, not the JUnit XML, is the source of truth: it survives the crash. JUnit files are
still written by pytest for humans and other tools: ``junit.xml`` for the first run,
``junit.<n>.xml`` for restart n, ``junit.rerun.xml`` for the rerun of failures. Starting
one pytest process and reading what it left is ``process.py``'s.

With ``processes`` > 1 all of this happens in each of several parts of the suite at once,
split by file (``parallel.py``): the files under ``<work_dir>/part-<n>/``.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from service.config import Settings
from service.domain.crash_storm import DEFAULT_RESTART_BUDGET, CrashStorm
from service.domain.nodeids import COLLECTION_NODEID, IMPORT_NODEID, SESSION_EXIT_NODEID
from service.domain.states import Outcome, StepStatus
from workers.pipeline.env.import_probe import decisive_text, probe_import, without_autoload
from workers.pipeline.env.requirements import already_satisfied, install_requirements
from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.isolation.procs import child_env, describe_signal
from workers.pipeline.isolation.sandbox import StepSandbox, run_captured
from workers.pipeline.logs.masking import SecretMasker
from workers.pipeline.logs.sink import LogSink
from workers.pipeline.steps.outcome import StepOutcome
from workers.pipeline.steps.recipe import Recipe
from workers.pipeline.testrun.collected import files_to_skip
from workers.pipeline.testrun.compile_cache import (
    cache_environ,
    current_compile_cache,
)
from workers.pipeline.testrun.parallel import PartResult, keyed_by_path, partition, run_parts
from workers.pipeline.testrun.process import RESULTS_FILE, PytestRunner, write_ids
from workers.pipeline.testrun.records import TestRecord, TestRunOutcome
from workers.pipeline.testrun.restarts import NO_TESTS, RAN, run_until_done

__all__ = ["COLLECTION_NODEID", "RESULTS_FILE", "SESSION_EXIT_NODEID", "TestRunOptions",
           "list_test_files", "outcome_of", "run_tests"]



@dataclass(frozen=True)
class TestRunOptions:
    """How a suite is run, apart from what is tested (the recipe, the env) and where.

    ``timeout_s`` bounds the whole step. The per-test limit is the smaller of the recipe's
    ``timeout_per_test`` and ``per_test_timeout_s`` (the operator's cap). ``only``, when
    non-empty, limits every pytest process to those node ids (a rerun of a run's failed
    tests); the crash isolation and the rerun of failures work as usual. ``build_dir``,
    when given, is exported as $OPENREG_BUILD_DIR like in the build step, for backends that
    load what they built from there instead of installing it. With a ``sandbox`` every
    pytest process runs in it; a test a sandbox limit stops is ``failed`` with the limit as
    its message (the backend broke the limit), not ``crashed``.

    With ``processes`` > 1 the suite's files are split over that many pytest processes run
    at once (``parallel.py``), each isolated as above; the records and the verdict are the
    serial step's. ``masker`` masks the parts' own logs like the step's. ``ignore_files``
    (absolute paths) are left out of the suite: a shard of a run (``shards.py``) runs only
    its own files. ``file_seconds`` (test file as pytest names it -> seconds it took last
    time) balances the processes. ``restart_budget`` bounds how often pytest is started
    again after a crash in the step (in each part of a parallel step), and the third crash
    with one signature ends the restarts anyway (``restarts.py``). With ``collect_once`` a
    restart or the rerun of failures does not collect the files that have nothing left to
    run in it (``collected.py``); off, every process collects the whole suite (the
    benchmark's "before").
    """

    __test__ = False  # not a pytest class

    timeout_s: int
    per_test_timeout_s: int
    rerun_failures: bool = True
    build_dir: Path | None = None
    only: Sequence[str] | None = None
    sandbox: StepSandbox | None = None
    processes: int = 1
    masker: SecretMasker | None = None
    ignore_files: Sequence[str] = ()
    file_seconds: Mapping[str, float] | None = None
    restart_budget: int = DEFAULT_RESTART_BUDGET
    serial_below_s: float = 0.0
    collect_once: bool = True

    @classmethod
    def of_settings(cls, settings: Settings, **options: Any) -> TestRunOptions:
        """The step's and each test's limits, the rerun of failures and the restarts after
        crashes as the settings say."""
        return cls(timeout_s=settings.step_timeout_s, per_test_timeout_s=settings.test_timeout_s,
                   rerun_failures=settings.rerun_failed_tests,
                   restart_budget=settings.test_restart_budget,
                   serial_below_s=settings.test_serial_below_s, **options)


@dataclass(frozen=True)
class _Suite:
    """What every pytest process of one test step shares."""

    recipe: Recipe
    env: TorchEnv
    options: TestRunOptions
    per_test_s: int
    timeout_args: tuple[str, ...]
    ignored: Path | None  # the file naming ``options.ignore_files``
    compile_env: Mapping[str, str]  # the run's compile cache (compile_cache.py), or nothing

    def runner(
        self, work_dir: Path, log: LogSink, *, ignore: Path | None = None,
        deadline: float | None = None,
    ) -> PytestRunner:
        """A runner of the suite in ``work_dir`` (the step's, a part's or the listing's);
        ``ignore`` names the files it must not collect (default: the step's)."""
        return PytestRunner(
            self.recipe,
            self.env,
            work_dir,
            log,
            timeout_s=self.options.timeout_s,
            per_test_s=self.per_test_s,
            timeout_args=list(self.timeout_args),
            build_dir=self.options.build_dir,
            only=list(self.options.only) if self.options.only else None,
            sandbox=self.options.sandbox,
            ignore_files=ignore or self.ignored,
            deadline=deadline,
            compile_env=self.compile_env,
            collect_once=self.options.collect_once,
        )


def run_tests(
    recipe: Recipe, env: TorchEnv, work_dir: Path, log: LogSink, options: TestRunOptions
) -> TestRunOutcome:
    """Run the backend's suite in ``work_dir``, logging to ``log``; see the module
    docstring and :class:`TestRunOptions`."""
    started = time.monotonic()
    suite = _prepare(recipe, env, work_dir, log, options)
    if options.only:
        log.write(f"ootci: running only {len(options.only)} test(s): the failures being rerun")
    # A rerun of named failures is small: one process, like before the parallel step.
    parts = [] if options.only or options.processes < 2 or _short_last_time(options, log) else _parts(
        suite.runner(work_dir / "listing", log), options.processes, options.file_seconds or {})
    if len(parts) > 1:
        deadline = started + options.timeout_s  # the listing counts against the step's limit

        def run_part(part_dir: Path, part_log: LogSink, ignore: Path) -> PartResult:
            return _run_to_the_end(suite, suite.runner(part_dir, part_log, ignore=ignore,
                                                       deadline=deadline))

        outcome = run_parts(parts, work_dir, log, run_part, masker=options.masker,
                            also_ignored=options.ignore_files)
    else:
        outcome = _run_to_the_end(suite, suite.runner(work_dir, log))
    return outcome_of(_explained(outcome, suite, work_dir, log), log.path)


def _prepare(
    recipe: Recipe, env: TorchEnv, work_dir: Path, log: LogSink, options: TestRunOptions
) -> _Suite:
    """Make ``work_dir`` ready (the sandbox prepared, an earlier run's results gone, the
    suite's requirements installed) and settle how each pytest process is limited."""
    work_dir.mkdir(parents=True, exist_ok=True)
    cache = current_compile_cache()
    sandbox = options.sandbox
    if sandbox is not None and cache is not None:
        # Writable and under the disk budget like the run's other dirs.
        sandbox = sandbox.also_writing(cache.resolve())
        options = replace(options, sandbox=sandbox)
    if sandbox is not None:
        log.write(sandbox.describe())
        sandbox.prepare(log.write)  # raises SandboxUnusable (infra) when it cannot be set up
    (work_dir / RESULTS_FILE).unlink(missing_ok=True)
    facts = env_facts(env, sandbox)
    if recipe.test_requires:
        # A pip start is a second or two of a small backend's run: skipped when pip would
        # find every requirement (and what it needs) installed already.
        if facts is not None and already_satisfied(recipe.test_requires, facts.sys_path,
                                                   env.version):
            log.write("ootci: the suite's test requirements are in the env already: "
                      + " ".join(recipe.test_requires))
        else:
            install_test_requirements(recipe, env, work_dir, log, sandbox)
            facts = env_facts(env, sandbox)  # pip may have brought pytest-timeout
    per_test_s = min(recipe.timeout_per_test_s, options.per_test_timeout_s)
    timeout_args: tuple[str, ...] = ()
    if facts is not None and facts.has_timeout:
        # `-p timeout` (its entry-point name) loads it even with plugin autoload disabled
        # and is a no-op otherwise; `-p pytest_timeout` would register it twice.
        timeout_args = ("-p", "timeout", f"--timeout={per_test_s}", "--timeout-method=thread")
    else:
        log.write("ootci: pytest-timeout not in the env; per-test limit enforced by ootci only")
    ignored = (write_ids(work_dir / "ignore-files.txt", options.ignore_files)
               if options.ignore_files else None)
    return _Suite(recipe, env, options, per_test_s, timeout_args, ignored,
                  cache_environ(cache) if cache is not None else {})


def _run_to_the_end(suite: _Suite, runner: PytestRunner) -> PartResult:
    """The suite (or a part of it) to its end, crash after crash; then its failures again."""
    storm = CrashStorm(restart_budget=suite.options.restart_budget)
    outcome = run_until_done(runner, storm)
    if suite.options.rerun_failures and outcome.problem is None:
        _rerun_failures(runner, outcome.records, runner.log)
    return outcome


def _explained(outcome: PartResult, suite: _Suite, work_dir: Path, log: LogSink) -> PartResult:
    """A suite that could not run a single test: when ``import torch`` itself fails, that
    is the result (not infrastructure), recorded as the one test that errored."""
    records, problem = outcome.records, outcome.problem
    if problem is not None and not records:
        import_error = probe_torch_import(suite.recipe, suite.env, suite.options.build_dir, work_dir,
                                     log, suite.options.sandbox)
        if import_error is not None:
            records[import_error.nodeid] = import_error
            problem = None
    return PartResult(records, outcome.first, problem)


def install_test_requirements(
    recipe: Recipe, env: TorchEnv, work_dir: Path, log: LogSink,
    sandbox: StepSandbox | None = None,
) -> bool:
    """Install the suite's own dependencies (``[test] requires`` or the backend's ``test``
    extra) into the run's env. A failure is logged, not raised: the suite then reports what
    it misses, and a missing module that is neither torch nor the backend is classified as
    the environment's."""
    if not recipe.test_requires:
        return True
    return install_requirements(env, recipe.test_requires, work_dir, log,
                                what="the suite's test requirements", sandbox=sandbox)


@dataclass(frozen=True)
class EnvFacts:
    """What the suite's interpreter sees: its ``sys.path`` (where pip would look for what
    is installed) and whether pytest-timeout is importable."""

    sys_path: tuple[str, ...]
    has_timeout: bool


_FACTS = ("import importlib.util, json, sys; print('OOTCI_ENV=' + json.dumps({'path': sys.path, "
          "'timeout': importlib.util.find_spec('pytest_timeout') is not None}))")


def env_facts(env: TorchEnv, sandbox: StepSandbox | None = None) -> EnvFacts | None:
    """Asked of the env's interpreter, in one start of it; None when it cannot answer. In
    the step's ``sandbox``: the env's .pth files run, and a build may have written them."""
    command = [str(env.python), "-P", "-c", _FACTS]  # -P: the cwd cannot shadow the env
    cwd = env.python.parent  # the sandbox uid can read the env, maybe not our own cwd
    try:
        proc = run_captured(sandbox, command, cwd=cwd,
                            env=child_env({}, pythonpath_front=env.pythonpath), timeout_s=120)
    except (OSError, subprocess.TimeoutExpired):
        return None  # the test run itself will report the broken interpreter
    for line in proc.stdout.splitlines():
        if line.startswith("OOTCI_ENV=") and proc.returncode == 0:
            facts = json.loads(line.removeprefix("OOTCI_ENV="))
            return EnvFacts(tuple(facts["path"]), bool(facts["timeout"]))
    return None




def outcome_of(part: PartResult, log_path: Path) -> TestRunOutcome:
    """The step's outcome and verdict from what its processes (or shards) recorded."""
    results = tuple(part.records.values())
    status, summary = _verdict(results, part.problem, no_tests=not results)
    return TestRunOutcome(
        step=StepOutcome(status, part.first.returncode, summary, log_path),
        results=results,
        problem=part.problem,
    )


def list_test_files(
    recipe: Recipe,
    env: TorchEnv,
    work_dir: Path,
    log: LogSink,
    *,
    build_dir: Path | None = None,
    sandbox: StepSandbox | None = None,
) -> list[str]:
    """The files pytest would collect for the recipe's command (absolute paths, in its
    order), without importing any; [] when pytest cannot list them."""
    work_dir.mkdir(parents=True, exist_ok=True)
    runner = PytestRunner(recipe, env, work_dir, log, timeout_s=600, per_test_s=600,
                          timeout_args=[], build_dir=build_dir, sandbox=sandbox)
    return _listed_files(runner)


def probe_torch_import(
    recipe: Recipe,
    env: TorchEnv,
    build_dir: Path | None,
    work_dir: Path,
    log: LogSink,
    sandbox: StepSandbox | None,
) -> TestRecord | None:
    """When pytest dies before running a test, ask the environment why (env/import_probe.py):
    torch alone first (autoload off), then torch with the backend autoloaded. The record
    (``<import torch>``) when either fails, else None; the isolate step repeats exactly this
    on the reference torch. pytest's
    conftest report drops the chained cause; the probe reports the innermost one."""
    overrides = dict(recipe.test_env)
    if build_dir is not None:
        overrides["OPENREG_BUILD_DIR"] = str(build_dir)
    environ = child_env(overrides, pythonpath_front=list(env.pythonpath))
    neutral = work_dir / "import-probe"  # empty: nothing of the source tree is importable
    for torch_itself, probe_env in ((True, without_autoload(environ)), (False, environ)):
        try:
            # The backend's code runs in the second probe: sandboxed like the tests.
            result = probe_import(env.python, "torch", probe_env, neutral, sandbox=sandbox)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.write(f"ootci: could not probe `import torch`: {exc}")
            return None
        if not result.failed:
            continue
        what = "torch alone (autoload off)" if torch_itself else "torch with the backend autoloaded"
        log.write(f"ootci: pytest ran no test; `import torch` of {what} in the same env says:")
        text = decisive_text(result, torch_itself=torch_itself)
        log.write(text)
        message = text.splitlines()[0] if text else f"import torch exited with {result.returncode}"
        return TestRecord(nodeid=IMPORT_NODEID, outcome=Outcome.ERROR, message=message,
                          details=text[-20000:])
    return None


def _short_last_time(options: TestRunOptions, log: LogSink) -> bool:
    """Whether the backend's previous run timed this suite as too short to split: listing
    its files is a pytest start of its own, and each part starts pytest (and imports torch)
    again, which a suite of a few seconds does not win back. The records are the same either
    way; a suite that grew is split again from the run after it (its times are recorded)."""
    seconds = options.file_seconds
    if not seconds or options.serial_below_s <= 0:
        return False  # never timed: split, and time it
    total = sum(seconds.values())
    if total >= options.serial_below_s:
        return False
    log.write(f"ootci: one pytest process: the suite's tests took {total:.1f} s in the "
              f"backend's previous run (split from {options.serial_below_s:g} s)")
    return True


def _parts(
    lister: PytestRunner, processes: int, file_seconds: Mapping[str, float]
) -> list[list[str]]:
    """The suite's files split for ``processes`` processes; [] when pytest cannot list them
    (a broken conftest, a wrapper script that drops our plugin): the serial step then
    runs and reports why, exactly as without parallelism."""
    lister.work_dir.mkdir(parents=True, exist_ok=True)
    files = _listed_files(lister)
    seconds = keyed_by_path(file_seconds, files, lister.recipe.source_dir)
    if seconds:
        lister.log.write(f"ootci: parts balanced by the backend's previous run: {len(seconds)} of "
                         f"{len(files)} file(s) timed, the others weighed by size")
    return partition(files, processes, seconds)


def _listed_files(lister: PytestRunner) -> list[str]:
    lister.log.write("ootci: listing the suite's test files")
    state = lister.run(lister.work_dir / "junit.xml", list_files=True)
    if state.proc.returncode not in {0, NO_TESTS} or state.started:
        return []
    return list(dict.fromkeys(state.files))


def _rerun_failures(runner: PytestRunner, records: dict[str, TestRecord], log: LogSink) -> None:
    failed = [n for n, r in records.items() if r.outcome == "failed"]
    if not failed or runner.remaining_s() <= 0:
        return
    log.write(f"ootci: rerunning {len(failed)} failed test(s) in a fresh process")
    state = runner.run(runner.work_dir / "junit.rerun.xml", select=failed,
                       skip_files=files_to_skip(records, failed))
    for nodeid in failed:
        event = state.finished.get(nodeid)
        if event is not None and event.get("outcome") == "passed":
            first = records[nodeid]
            records[nodeid] = TestRecord(
                nodeid=nodeid,
                outcome=Outcome.FLAKY,
                duration_s=first.duration_s,
                message=f"passed on rerun; first run: {first.message}",
                details=first.details,
            )
    code = state.proc.returncode
    if code not in RAN:
        log.write(f"ootci: the rerun ended with {describe_signal(code) or code}")


def _verdict(
    results: tuple[TestRecord, ...], problem: str | None, *, no_tests: bool
) -> tuple[StepStatus, str]:
    counts: dict[str, int] = {}
    for record in results:
        counts[record.outcome] = counts.get(record.outcome, 0) + 1
    order = [Outcome.PASSED, Outcome.FAILED, Outcome.ERROR, Outcome.CRASHED, Outcome.FLAKY,
             Outcome.SKIPPED]
    summary = ", ".join(f"{counts[o]} {o}" for o in order if counts.get(o))
    if problem is not None:
        return StepStatus.ERRORED, f"{problem}; {summary}" if summary else problem
    if no_tests:
        return StepStatus.FAILED, "no tests were collected"
    if any(counts.get(o) for o in Outcome.FAILING):
        return StepStatus.FAILED, summary
    return StepStatus.PASSED, summary
