"""One pytest process of the test step, and what it left behind.

:class:`PytestRunner` starts pytest for a suite with ootci's plugin (``pytest_plugin/``)
loaded through ``PYTEST_ADDOPTS``, the node ids to select or deselect in files named by
``$OOTCI_SELECT`` / ``$OOTCI_DESELECT``, in the step's sandbox and under its deadline. While
it runs, a watchdog reads the plugin's JSONL (``results.jsonl``: a ``started`` line before
each test, a ``finished`` line after it) and kills pytest when one test outlives the
per-test limit. What the process did comes back as a :class:`PytestProcess`: its exit, the
events it wrote, the tail of its log. What to make of it (a crash, a restart, a rerun) is
``runner.py``'s.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from service.domain.states import Outcome
from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.isolation.procs import (
    ProcResult,
    child_env,
    describe_signal,
    run_streaming,
    signal_of,
)
from workers.pipeline.isolation.sandbox import DiskBudget, StepSandbox, combine
from workers.pipeline.logs.sink import LogSink
from workers.pipeline.steps.recipe import Recipe, expand
from workers.pipeline.testrun.pytest_plugin import PLUGIN_DIR, PLUGIN_MODULE
from workers.pipeline.testrun.records import TestRecord

RESULTS_FILE = "results.jsonl"
_TIMEOUT_BANNER = re.compile(r"^\++ Timeout \++$")
# The signals the kernel sends a process over its CPU-time or file-size rlimit.
_LIMIT_SIGNALS = {signal.SIGXCPU, signal.SIGXFSZ}


@dataclass
class PytestProcess:
    """What one pytest process did: its exit, its JSONL events, the log tail it left."""

    proc: ProcResult
    tail: list[str]
    # True when ootci's own per-test watchdog killed it.
    watchdog_fired: bool = False
    # Why the sandbox stopped it (a limit tripped), else None.
    limit_tripped: str | None = None
    finished: dict[str, dict[str, Any]] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)
    # The files pytest would collect, from a listing run (parallel.py).
    files: list[str] = field(default_factory=list)
    # The node ids it was about to run, after deselection (the plugin's ``collected``).
    collected: list[str] = field(default_factory=list)
    session_finished: bool = False

    @property
    def unfinished(self) -> str | None:
        pending = [n for n in self.started if n not in self.finished]
        return pending[-1] if pending else None


class ResultsFile:
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


class Watchdog:
    """Kills pytest when one test outlives its deadline, whatever that test is doing.

    pytest-timeout (thread method) usually fires first and dumps the stacks; this is the
    backstop for when it is not installed or cannot run (a C++ loop holding the GIL)."""

    def __init__(self, results: ResultsFile, attempt: int, limit_s: float, label: str) -> None:
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


def plugin_environ(
    recipe: Recipe,
    env: TorchEnv,
    results: Path,
    attempt: int,
    timeout_args: list[str],
    build_dir: Path | None,
    id_files: dict[str, str],
    compile_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    # --rootdir: node ids are relative to the backend's tree whatever config pytest finds
    # above it (a checkout holding ./.ootci), never to a run tree's cache path, so a test
    # keeps its id, history and breakage across edits, shas and homes.
    addopts = shlex.join(["-p", PLUGIN_MODULE, "--continue-on-collection-errors",
                          f"--rootdir={recipe.source_dir}", *timeout_args])
    overrides = {
        **(compile_env or {}),  # the run's compile cache; a recipe's own choice wins
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


def write_ids(path: Path, nodeids: Iterable[str]) -> Path:
    path.write_text("".join(f"{n}\n" for n in nodeids), encoding="utf-8")
    return path


def record_of(event: dict[str, Any]) -> TestRecord:
    return TestRecord(
        nodeid=str(event["nodeid"]),
        outcome=Outcome(event["outcome"]),  # the plugin writes only Outcome values
        duration_s=event.get("duration"),
        message=event.get("message"),
        details=event.get("longrepr"),
    )


def crash_message(attempt: PytestProcess, per_test_s: int) -> str:
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


class PytestRunner:
    """Starts the pytest processes of one suite (or one part of it) in one work dir."""

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
        compile_env: Mapping[str, str] | None = None,
        collect_once: bool = True,
    ) -> None:
        self.recipe, self.env, self.work_dir, self.log = recipe, env, work_dir, log
        self.sandbox = sandbox
        if sandbox is not None:
            sandbox.own_dir(work_dir)  # a part's or the listing's dir: pytest writes there
        self.disk_budget: DiskBudget | None = sandbox.disk_budget() if sandbox else None
        self.only = only  # node ids every run is limited to; None = the whole suite
        self.ignore_files = ignore_files  # files of the other parts of a parallel step
        self.compile_env = dict(compile_env or {})
        # Whether a restart or rerun leaves out the files with nothing left to run in it.
        self.collect_once = collect_once
        self.per_test_s = per_test_s
        self.timeout_args = timeout_args
        self.build_dir = build_dir
        self.deadline = deadline if deadline is not None else time.monotonic() + timeout_s
        self.timeout_s = timeout_s
        self.results_path = work_dir / RESULTS_FILE
        self.results = ResultsFile(self.results_path)
        self.attempt = 0
        self.step_killed: str | None = None

    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()

    def _ignore_file(self, attempt: int, skip_files: Iterable[str]) -> Path | None:
        """The file naming every file this process must not collect: the other parts' (or
        shards') and ``skip_files``, resolved as the plugin compares them."""
        root = self.recipe.source_dir
        skip = [str(path) for f in skip_files if (path := (root / f).resolve()).is_file()]
        if not skip:
            return self.ignore_files
        inherited = (self.ignore_files.read_text(encoding="utf-8").splitlines()
                     if self.ignore_files is not None else [])
        return write_ids(self.work_dir / f"ignore-files.{attempt}.txt", [*inherited, *skip])

    def run(
        self,
        junit: Path,
        *,
        deselect: Iterable[str] = (),
        select: Iterable[str] | None = None,
        list_files: bool = False,
        skip_files: Iterable[str] = (),
    ) -> PytestProcess:
        """One pytest process. ``skip_files`` (as node ids name them: relative to the
        suite's root) are not collected at all, on top of ``ignore_files``: files an earlier
        process of the suite ran to the end (``collected.py``)."""
        attempt = self.attempt
        self.attempt += 1
        id_files: dict[str, str] = {}
        if deselect:
            id_files["OOTCI_DESELECT"] = str(
                write_ids(self.work_dir / f"deselect.{attempt}.txt", deselect)
            )
        if select is not None:
            id_files["OOTCI_SELECT"] = str(
                write_ids(self.work_dir / f"select.{attempt}.txt", select)
            )
        ignore = self._ignore_file(attempt, skip_files if self.collect_once else ())
        if ignore is not None:
            id_files["OOTCI_IGNORE_FILES"] = str(ignore)
        if list_files:
            id_files["OOTCI_LIST_FILES"] = "1"
        environ = plugin_environ(
            self.recipe,
            self.env,
            self.results_path,
            attempt,
            self.timeout_args,
            self.build_dir,
            id_files,
            self.compile_env,
        )
        command = expand(self.recipe.test_command, python=str(self.env.python), junit=str(junit))
        # Grace beyond the per-test limit so pytest-timeout, which dumps stacks, fires first.
        watchdog = Watchdog(
            self.results,
            attempt,
            self.per_test_s + max(5.0, self.per_test_s * 0.25),
            f"a test ran longer than {self.per_test_s} s",
        )
        self.log.write(f"ootci: pytest run {attempt} ({junit.name})")
        witness = self.sandbox.witness() if self.sandbox is not None else None
        if self.sandbox is not None:
            command = self.sandbox.command(command, self.recipe.source_dir, witness)
        first_line = self.log.lines_written
        proc = run_streaming(
            command,
            cwd=self.recipe.source_dir,
            env=environ,
            log=self.log,
            timeout_s=max(self.remaining_s(), 1.0),
            watchdog=combine(watchdog, self.disk_budget),
            preexec_fn=self.sandbox.preexec() if self.sandbox is not None else None,
            witness=witness,
        )
        if self.sandbox is not None:
            # bwrap's exit 1 would read as pytest's "tests failed" with none recorded (or, on
            # a restart, as the suite's end): the step is the machine's infra error instead.
            self.sandbox.unstarted(proc.setup_failure, self.log.write)
        limit = limit_tripped(proc, self.disk_budget)
        if limit is not None and self.disk_budget is not None and self.disk_budget.tripped:
            self.step_killed = limit  # the run's dirs are full: no point restarting
        elif proc.killed_reason is not None and watchdog.fired_on is None:
            self.step_killed = f"timed out after {self.timeout_s} s"
        watchdog()  # drain what was written after the last poll
        state = PytestProcess(
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
            elif kind == "collected":
                state.collected = [str(n) for n in event.get("nodeids", ())]
        return state


def limit_tripped(proc: ProcResult, budget: DiskBudget | None) -> str | None:
    """Why a sandbox limit stopped pytest: the disk budget, or the kernel's signal for the
    CPU-time or file-size rlimit. None when it ended (or died) for any other reason."""
    if budget is not None and budget.tripped is not None:
        return budget.tripped
    sig = signal_of(proc.returncode)
    if sig in _LIMIT_SIGNALS:
        return f"ootci: sandbox: {describe_signal(proc.returncode)}: over the sandbox's limit"
    return None


