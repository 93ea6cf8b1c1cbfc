"""The test step: run a backend's pytest suite with crash isolation.

Our plugin (``pytest_plugin/ootci_pytest_plugin.py``) writes a ``started`` line before each
test and a ``finished`` line after it to ``<work_dir>/results.jsonl``. When pytest dies (a
segfault in the backend, an abort, a per-test timeout) the test that started and never
finished is the one that killed it: it is recorded as ``crashed`` and pytest is started
again with every recorded test deselected, so one bad kernel costs one result, not the
suite. Failures are then rerun once in a fresh process; a pass there makes them ``flaky``.

The JSONL, not the JUnit XML, is the source of truth: it survives the crash. JUnit files are
still written by pytest for humans and other tools: ``junit.xml`` for the first run,
``junit.<n>.xml`` for restart n, ``junit.rerun.xml`` for the rerun of failures.

With ``processes`` > 1 all of this happens in each of several parts of the suite at once,
split by file (``testing_parallel.py``): the files under ``<work_dir>/part-<n>/``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from service.domain.states import Outcome, StepStatus
from workers.pipeline.import_probe import decisive_text, probe_import, without_autoload
from workers.pipeline.logsink import LogSink
from workers.pipeline.masking import SecretMasker
from workers.pipeline.procs import (
    ProcResult,
    child_env,
    describe_signal,
    run_streaming,
    signal_of,
)
from workers.pipeline.pytest_plugin import PLUGIN_DIR, PLUGIN_MODULE
from workers.pipeline.recipe import expand
from workers.pipeline.sandbox import DiskBudget, StepSandbox, combine
from workers.pipeline.testing_parallel import PartResult, keyed_by_path, partition, run_parts
from workers.pipeline.types import (
    Recipe,
    StepOutcome,
    TestRecord,
    TestRunOutcome,
    TorchEnv,
)

RESULTS_FILE = "results.jsonl"
# pytest exit codes (pytest.ExitCode) that mean "the suite ran".
_RAN = {0, 1}
_NO_TESTS = 5
_TIMEOUT_BANNER = re.compile(r"^\++ Timeout \++$")
# Node ids of records that belong to no test: pytest died outside any test.
COLLECTION_NODEID = "<collection>"
SESSION_EXIT_NODEID = "<session exit>"
# How much of the dying process's output a crash record keeps (faulthandler's traceback,
# pytest-timeout's stack dump).
_DETAIL_LINES = 80
# The signals the kernel sends a process over its CPU-time or file-size rlimit.
_LIMIT_SIGNALS = {signal.SIGXCPU, signal.SIGXFSZ}


@dataclass
class _Attempt:
    """What one pytest process did: its exit, its JSONL events, the log tail it left."""

    proc: ProcResult
    tail: list[str]
    # True when ootci's own per-test watchdog killed it.
    watchdog_fired: bool = False
    # Why the sandbox stopped it (a limit tripped), else None.
    limit_tripped: str | None = None
    finished: dict[str, dict[str, Any]] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)
    # The files pytest would collect, from a listing run (testing_parallel.py).
    files: list[str] = field(default_factory=list)
    session_finished: bool = False

    @property
    def unfinished(self) -> str | None:
        pending = [n for n in self.started if n not in self.finished]
        return pending[-1] if pending else None


class _ResultsFile:
    """Reads the JSONL incrementally; the per-test watchdog polls it while pytest runs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def new_events(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        *lines, self._partial = data.split(b"\n")
        events = []
        for line in lines:
            try:
                events.append(json.loads(line))
            except ValueError:
                continue  # a line torn by a kill mid-write is not an event
        return events


class _Watchdog:
    """Kills pytest when one test outlives its deadline, whatever that test is doing.

    pytest-timeout (thread method) usually fires first and dumps the stacks; this is the
    backstop for when it is not installed or cannot run (a C++ loop holding the GIL)."""

    def __init__(self, results: _ResultsFile, attempt: int, limit_s: float, label: str) -> None:
        self._results = results
        self._attempt = attempt
        self._limit_s = limit_s
        self._label = label
        self.events: list[dict[str, Any]] = []
        self._current: tuple[str, float] | None = None
        self.fired_on: str | None = None

    def __call__(self) -> str | None:
        for event in self._results.new_events():
            if event.get("attempt") != self._attempt:
                continue
            self.events.append(event)
            if event.get("event") == "started":
                self._current = (event["nodeid"], time.monotonic())
            elif (
                event.get("event") == "finished"
                and self._current is not None
                and (event.get("nodeid") == self._current[0])
            ):
                self._current = None
        if self._current is not None and time.monotonic() - self._current[1] > self._limit_s:
            self.fired_on = self._current[0]
            return self._label
        return None


def _plugin_environ(
    recipe: Recipe,
    env: TorchEnv,
    results: Path,
    attempt: int,
    timeout_args: list[str],
    build_dir: Path | None,
    id_files: dict[str, str],
) -> dict[str, str]:
    addopts = " ".join(["-p", PLUGIN_MODULE, "--continue-on-collection-errors", *timeout_args])
    overrides = {
        **recipe.test_env,
        "OOTCI_RESULTS": str(results),
        "OOTCI_ATTEMPT": str(attempt),
        "PYTHONFAULTHANDLER": "1",
        "PYTHONUNBUFFERED": "1",
        **id_files,
    }
    if build_dir is not None:
        overrides["OPENREG_BUILD_DIR"] = str(build_dir)
    existing = recipe.test_env.get("PYTEST_ADDOPTS", os.environ.get("PYTEST_ADDOPTS", ""))
    # PYTEST_ADDOPTS, not argv: it reaches pytest even through a vendor's wrapper script.
    overrides["PYTEST_ADDOPTS"] = f"{existing} {addopts}".strip()
    environ = child_env(overrides, pythonpath_front=[*env.pythonpath, PLUGIN_DIR])
    for name in ("OOTCI_DESELECT", "OOTCI_SELECT", "OOTCI_IGNORE_FILES", "OOTCI_LIST_FILES"):
        if name not in id_files:
            environ.pop(name, None)
    return environ


def install_test_requirements(recipe: Recipe, env: TorchEnv, work_dir: Path, log: LogSink) -> bool:
    """Install the suite's own dependencies (``[test] requires`` or the backend's ``test``
    extra) into the run's env. Wheels only (no sdist's setup.py runs outside the sandbox)
    and torch held at the env's version (a test dependency must not replace the torch under
    test). A failure is logged, not raised: the suite then reports what it misses, and a
    missing module that is neither torch nor the backend is classified as the environment's."""
    if not recipe.test_requires:
        return True
    constraints = work_dir / "test-constraints.txt"
    constraints.write_text(f"torch=={env.version}\n", encoding="utf-8")
    command = [str(env.python), "-m", "pip", "install", "--disable-pip-version-check",
               "--only-binary=:all:", "-c", str(constraints), *recipe.test_requires]
    log.write(f"ootci: installing the suite's test requirements: {' '.join(recipe.test_requires)}")
    result = run_streaming(command, cwd=work_dir, env=child_env({}, pythonpath_front=env.pythonpath),
                           log=log, timeout_s=1800)
    if result.returncode != 0:
        log.write(f"ootci: installing the test requirements failed (exit {result.returncode})")
    return result.returncode == 0


def has_module(env: TorchEnv, module: str, sandbox: StepSandbox | None = None) -> bool:
    """Whether the env's interpreter can import ``module`` (e.g. pytest_timeout). In the
    step's ``sandbox``: the env's .pth files run, and a build may have written them."""
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    command = [str(env.python), "-P", "-c", probe]  # -P: the cwd cannot shadow the env
    cwd = env.python.parent  # the sandbox uid can read the env, maybe not our own cwd
    try:
        proc = subprocess.run(
            sandbox.command(command, cwd) if sandbox else command,
            cwd=cwd,
            env=child_env({}, pythonpath_front=env.pythonpath),
            capture_output=True,
            timeout=120,
            preexec_fn=sandbox.preexec() if sandbox else None,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False  # the test run itself will report the broken interpreter
    return proc.returncode == 0


def _write_ids(path: Path, nodeids: Iterable[str]) -> Path:
    path.write_text("".join(f"{n}\n" for n in nodeids), encoding="utf-8")
    return path


def _record(event: dict[str, Any]) -> TestRecord:
    return TestRecord(
        nodeid=str(event["nodeid"]),
        outcome=Outcome(event["outcome"]),  # the plugin writes only Outcome values
        duration_s=event.get("duration"),
        message=event.get("message"),
        details=event.get("longrepr"),
    )


def _crash_message(attempt: _Attempt, per_test_s: int) -> str:
    proc = attempt.proc
    if attempt.limit_tripped is not None:
        return attempt.limit_tripped
    if attempt.watchdog_fired:
        return f"timed out after {per_test_s} s (killed by ootci)"
    if any(_TIMEOUT_BANNER.match(line.strip()) for line in attempt.tail):
        return f"timed out after {per_test_s} s"
    if proc.killed_reason is not None:
        return proc.killed_reason
    return describe_signal(proc.returncode) or f"pytest exited with code {proc.returncode}"


class _Runner:
    def __init__(
        self,
        recipe: Recipe,
        env: TorchEnv,
        work_dir: Path,
        log: LogSink,
        *,
        timeout_s: int,
        per_test_s: int,
        timeout_args: list[str],
        build_dir: Path | None,
        only: list[str] | None = None,
        sandbox: StepSandbox | None = None,
        ignore_files: Path | None = None,
        deadline: float | None = None,
    ) -> None:
        self.recipe, self.env, self.work_dir, self.log = recipe, env, work_dir, log
        self.sandbox = sandbox
        if sandbox is not None:
            sandbox.own_dir(work_dir)  # a part's or the listing's dir: pytest writes there
        self.disk_budget: DiskBudget | None = sandbox.disk_budget() if sandbox else None
        self.only = only  # node ids every run is limited to; None = the whole suite
        self.ignore_files = ignore_files  # files of the other parts of a parallel step
        self.per_test_s = per_test_s
        self.timeout_args = timeout_args
        self.build_dir = build_dir
        self.deadline = deadline if deadline is not None else time.monotonic() + timeout_s
        self.timeout_s = timeout_s
        self.results_path = work_dir / RESULTS_FILE
        self.results = _ResultsFile(self.results_path)
        self.attempt = 0
        self.step_killed: str | None = None

    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()

    def run(
        self,
        junit: Path,
        *,
        deselect: Iterable[str] = (),
        select: Iterable[str] | None = None,
        list_files: bool = False,
    ) -> _Attempt:
        attempt = self.attempt
        self.attempt += 1
        id_files: dict[str, str] = {}
        if deselect:
            id_files["OOTCI_DESELECT"] = str(
                _write_ids(self.work_dir / f"deselect.{attempt}.txt", deselect)
            )
        if select is not None:
            id_files["OOTCI_SELECT"] = str(
                _write_ids(self.work_dir / f"select.{attempt}.txt", select)
            )
        if self.ignore_files is not None:
            id_files["OOTCI_IGNORE_FILES"] = str(self.ignore_files)
        if list_files:
            id_files["OOTCI_LIST_FILES"] = "1"
        environ = _plugin_environ(
            self.recipe,
            self.env,
            self.results_path,
            attempt,
            self.timeout_args,
            self.build_dir,
            id_files,
        )
        command = expand(self.recipe.test_command, python=str(self.env.python), junit=str(junit))
        # Grace beyond the per-test limit so pytest-timeout, which dumps stacks, fires first.
        watchdog = _Watchdog(
            self.results,
            attempt,
            self.per_test_s + max(5.0, self.per_test_s * 0.25),
            f"a test ran longer than {self.per_test_s} s",
        )
        self.log.write(f"ootci: pytest run {attempt} ({junit.name})")
        if self.sandbox is not None:
            command = self.sandbox.command(command, self.recipe.source_dir)
        first_line = self.log.lines_written
        proc = run_streaming(
            command,
            cwd=self.recipe.source_dir,
            env=environ,
            log=self.log,
            timeout_s=max(self.remaining_s(), 1.0),
            watchdog=combine(watchdog, self.disk_budget),
            preexec_fn=self.sandbox.preexec() if self.sandbox is not None else None,
        )
        limit = _limit_tripped(proc, self.disk_budget)
        if limit is not None and self.disk_budget is not None and self.disk_budget.tripped:
            self.step_killed = limit  # the run's dirs are full: no point restarting
        elif proc.killed_reason is not None and watchdog.fired_on is None:
            self.step_killed = f"timed out after {self.timeout_s} s"
        watchdog()  # drain what was written after the last poll
        state = _Attempt(
            proc,
            self.log.tail(self.log.lines_written - first_line),
            watchdog.fired_on is not None,
            limit,
        )
        for event in watchdog.events:
            kind = event.get("event")
            if kind == "started":
                state.started.append(event["nodeid"])
            elif kind == "finished":
                state.finished.setdefault(event["nodeid"], event)
            elif kind == "session_finished":
                state.session_finished = True
            elif kind == "test_file":
                state.files.append(str(event["path"]))
        return state


def _limit_tripped(proc: ProcResult, budget: DiskBudget | None) -> str | None:
    """Why a sandbox limit stopped pytest: the disk budget, or the kernel's signal for the
    CPU-time or file-size rlimit. None when it ended (or died) for any other reason."""
    if budget is not None and budget.tripped is not None:
        return budget.tripped
    sig = signal_of(proc.returncode)
    if sig in _LIMIT_SIGNALS:
        return f"ootci: sandbox: {describe_signal(proc.returncode)}: over the sandbox's limit"
    return None


def run_tests(
    recipe: Recipe,
    env: TorchEnv,
    work_dir: Path,
    log: LogSink,
    *,
    timeout_s: int,
    per_test_timeout_s: int,
    rerun_failures: bool = True,
    build_dir: Path | None = None,
    only: Sequence[str] | None = None,
    sandbox: StepSandbox | None = None,
    processes: int = 1,
    masker: SecretMasker | None = None,
    ignore_files: Sequence[str] = (),
    file_seconds: Mapping[str, float] | None = None,
) -> TestRunOutcome:
    """Run the backend's suite; see the module docstring.

    ``only``, when non-empty, limits every pytest process to those node ids (a rerun of
    a run's failed tests); the crash isolation and the rerun of failures work as usual.

    The per-test limit is the smaller of the recipe's ``timeout_per_test`` and
    ``per_test_timeout_s`` (the operator's cap). ``build_dir``, when given, is exported as
    $OPENREG_BUILD_DIR like in the build step, for backends that load what they built from
    there instead of installing it. With a ``sandbox`` every pytest process runs in it; a
    test a sandbox limit stops is ``failed`` with the limit as its message (the backend
    broke the limit), not ``crashed``.

    With ``processes`` > 1 the suite's files are split over that many pytest processes
    run at once (``testing_parallel.py``), each isolated as above; the records and the
    verdict are the serial step's. ``masker`` masks the parts' own logs like the step's.
    ``ignore_files`` (absolute paths) are left out of the suite: a shard of a run
    (``shards.py``) runs only its own files. ``file_seconds`` (test file as pytest names it
    -> seconds it took last time) balances the processes.
    """
    started = time.monotonic()
    work_dir.mkdir(parents=True, exist_ok=True)
    if sandbox is not None:
        log.write(sandbox.describe())
        sandbox.prepare()
    results_path = work_dir / RESULTS_FILE
    results_path.unlink(missing_ok=True)
    install_test_requirements(recipe, env, work_dir, log)
    per_test_s = min(recipe.timeout_per_test_s, per_test_timeout_s)
    timeout_args: list[str] = []
    if has_module(env, "pytest_timeout", sandbox):
        # `-p timeout` (its entry-point name) loads it even with plugin autoload disabled
        # and is a no-op otherwise; `-p pytest_timeout` would register it twice.
        timeout_args = ["-p", "timeout", f"--timeout={per_test_s}", "--timeout-method=thread"]
    else:
        log.write("ootci: pytest-timeout not in the env; per-test limit enforced by ootci only")

    ignored = _write_ids(work_dir / "ignore-files.txt", ignore_files) if ignore_files else None

    def runner_in(
        directory: Path, sink: LogSink, ignore: Path | None = ignored,
        deadline: float | None = None,
    ) -> _Runner:
        return _Runner(
            recipe,
            env,
            directory,
            sink,
            timeout_s=timeout_s,
            per_test_s=per_test_s,
            timeout_args=timeout_args,
            build_dir=build_dir,
            only=list(only) if only else None,
            sandbox=sandbox,
            ignore_files=ignore,
            deadline=deadline,
        )

    if only:
        log.write(f"ootci: running only {len(only)} test(s): the failures being rerun")
    # A rerun of named failures is small: one process, like before the parallel step.
    parts = [] if only or processes < 2 else _parts(
        runner_in(work_dir / "listing", log), processes, file_seconds or {})

    def run_to_the_end(runner: _Runner) -> PartResult:
        outcome = _run_until_done(runner)
        if rerun_failures and outcome.problem is None:
            _rerun_failures(runner, outcome.records, runner.log)
        return outcome

    if len(parts) > 1:
        deadline = started + timeout_s  # the listing counts against the step's limit

        def run_part(part_dir: Path, part_log: LogSink, ignore: Path) -> PartResult:
            return run_to_the_end(runner_in(part_dir, part_log, ignore, deadline))

        outcome = run_parts(parts, work_dir, log, run_part, masker=masker,
                            also_ignored=ignore_files)
    else:
        outcome = run_to_the_end(runner_in(work_dir, log))
    records, problem = outcome.records, outcome.problem
    if problem is not None and not records:
        import_error = _probe_import(recipe, env, build_dir, work_dir, log, sandbox)
        if import_error is not None:
            # Not infrastructure: torch (with the backend autoloaded) cannot be imported.
            records[import_error.nodeid] = import_error
            problem = None
    return outcome_of(PartResult(records, outcome.first, problem), log.path)


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
    runner = _Runner(recipe, env, work_dir, log, timeout_s=600, per_test_s=600,
                     timeout_args=[], build_dir=build_dir, sandbox=sandbox)
    return _listed_files(runner)


IMPORT_NODEID = "<import torch>"


def _probe_import(
    recipe: Recipe,
    env: TorchEnv,
    build_dir: Path | None,
    work_dir: Path,
    log: LogSink,
    sandbox: StepSandbox | None,
) -> TestRecord | None:
    """When pytest dies before running a test, ask the environment why (import_probe.py):
    torch alone first (autoload off), then torch with the backend autoloaded. pytest's
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


def _parts(
    lister: _Runner, processes: int, file_seconds: Mapping[str, float]
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


def _listed_files(lister: _Runner) -> list[str]:
    lister.log.write("ootci: listing the suite's test files")
    state = lister.run(lister.work_dir / "junit.xml", list_files=True)
    if state.proc.returncode not in {0, _NO_TESTS} or state.started:
        return []
    return list(dict.fromkeys(state.files))


def _run_until_done(runner: _Runner) -> PartResult:
    """Run pytest, restarting it after each crash without the tests already recorded.

    Returns the records in the order tests ran, the first pytest process's result and,
    when the suite could not be run to the end, why.
    """
    records: dict[str, TestRecord] = {}
    first: ProcResult | None = None
    problem: str | None = None  # why the step could not run the suite to the end
    work_dir, log, per_test_s = runner.work_dir, runner.log, runner.per_test_s

    while True:
        junit = work_dir / ("junit.xml" if runner.attempt == 0 else f"junit.{runner.attempt}.xml")
        state = runner.run(junit, deselect=list(records), select=runner.only)
        proc, tail = state.proc, state.tail
        first = first or proc
        new = 0
        for nodeid, event in state.finished.items():
            if nodeid not in records:
                records[nodeid] = _record(event)
                new += 1
        crashed = state.unfinished
        if crashed is not None and crashed in records:
            # Deselection did not take (a node id pytest does not reproduce): stop rather
            # than crash on the same test forever.
            problem = f"pytest keeps dying in {crashed}"
            break
        if crashed is not None:
            records[crashed] = TestRecord(
                nodeid=crashed,
                # A limit the backend's test broke is its failure, not a crash to blame on
                # the torch under test.
                outcome=Outcome.FAILED if state.limit_tripped else Outcome.CRASHED,
                message=_crash_message(state, per_test_s),
                details="\n".join(tail[-_DETAIL_LINES:]),
            )
            log.write(f"ootci: {crashed} {records[crashed].outcome}: {records[crashed].message}")
            if runner.step_killed is not None:
                problem = runner.step_killed
                break
            if runner.remaining_s() <= 0:
                problem = f"timed out after {runner.timeout_s} s"
                break
            continue  # restart without everything recorded so far
        if runner.step_killed is not None:
            problem = runner.step_killed
            break
        signal_text = describe_signal(proc.returncode)
        if signal_text is not None:
            # Died outside any test: while collecting, or after the last one (exit-time
            # teardown of a backend is a real bug too).
            nodeid = SESSION_EXIT_NODEID if state.session_finished else COLLECTION_NODEID
            records[nodeid] = TestRecord(
                nodeid=nodeid,
                outcome=Outcome.CRASHED,
                message=signal_text,
                details="\n".join(tail[-_DETAIL_LINES:]),
            )
            break
        if proc.returncode not in _RAN | {_NO_TESTS} and new == 0:
            problem = (
                f"cannot run the test command: {proc.start_error}"
                if proc.start_error
                else f"pytest exited with code {proc.returncode} without running tests"
            )
        break

    assert first is not None  # the loop runs at least once
    return PartResult(records, first, problem)


def _rerun_failures(runner: _Runner, records: dict[str, TestRecord], log: LogSink) -> None:
    failed = [n for n, r in records.items() if r.outcome == "failed"]
    if not failed or runner.remaining_s() <= 0:
        return
    log.write(f"ootci: rerunning {len(failed)} failed test(s) in a fresh process")
    state = runner.run(runner.work_dir / "junit.rerun.xml", select=failed)
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
    if code not in _RAN:
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
