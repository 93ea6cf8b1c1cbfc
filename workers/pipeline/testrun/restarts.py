"""The restart loop of one suite (or one part of it): pytest again after each crash.

When pytest dies, the test that started and never finished is recorded as ``crashed`` and
pytest is started again without every test recorded so far, so one bad kernel costs one
result. A cause that crashes test after test (a torch whose ``manual_seed`` segfaults) would
cost an interpreter start per test: the crashes are counted by signature
(``service/domain/crash_storm.py``) and the third crash with one signature, or a crash past
the step's restart budget, ends the loop. The tests the last process was about to run (the
plugin's ``collected`` line) are then recorded as ``skipped``, "not run: same crash as
<the first test that crashed so>", and the step ends failed: the crashes are its results.

A crash's message carries its signature ("Segmentation fault (SIGSEGV) in
torch/random.py:manual_seed"), so the classifier's ``crash-signal`` rule captures it and
the crashes of one storm share one fingerprint, one breakage.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from service.domain.crash_storm import CrashStorm, crash_signature
from service.domain.nodeids import COLLECTION_NODEID, SESSION_EXIT_NODEID
from service.domain.states import Outcome
from workers.pipeline.isolation.procs import ProcResult, describe_signal
from workers.pipeline.logs.sink import LogSink
from workers.pipeline.testrun.collected import files_to_skip
from workers.pipeline.testrun.parallel import PartResult
from workers.pipeline.testrun.process import PytestProcess, crash_message, record_of
from workers.pipeline.testrun.records import TestRecord

# pytest exit codes (pytest.ExitCode) that mean "the suite ran".
RAN = {0, 1}
NO_TESTS = 5
# How much of the dying process's output a crash record keeps (faulthandler's traceback,
# pytest-timeout's stack dump).
DETAIL_LINES = 80


class Runner(Protocol):
    """What the loop needs of ``process.PytestRunner``."""

    work_dir: Path
    log: LogSink
    per_test_s: int
    timeout_s: int
    attempt: int
    only: list[str] | None
    step_killed: str | None

    def remaining_s(self) -> float: ...

    def run(self, junit: Path, *, deselect: Iterable[str] = (),
            select: Iterable[str] | None = None,
            skip_files: Iterable[str] = ()) -> PytestProcess: ...


@dataclass
class _Loop:
    records: dict[str, TestRecord] = field(default_factory=dict)
    first: ProcResult | None = None
    problem: str | None = None  # why the step could not run the suite to the end
    # Files with nothing left to run, from the last process's collection (collected.py).
    skip_files: list[str] = field(default_factory=list)


def run_until_done(runner: Runner, storm: CrashStorm) -> PartResult:
    """Run pytest, restarting it after each crash without the tests already recorded,
    until the suite is done, a storm or the restart budget ends it, or the step must stop.

    Returns the records in the order tests ran, the first pytest process's result and,
    when the suite could not be run to the end, why.
    """
    loop = _Loop()
    while True:
        attempt = runner.attempt
        junit = runner.work_dir / ("junit.xml" if attempt == 0 else f"junit.{attempt}.xml")
        state = runner.run(junit, deselect=list(loop.records), select=runner.only,
                           skip_files=loop.skip_files)
        loop.first = loop.first or state.proc
        new = _take_finished(state, loop.records)
        crashed = state.unfinished
        if crashed is not None and crashed in loop.records:
            # Deselection did not take (a node id pytest does not reproduce): stop rather
            # than crash on the same test forever.
            loop.problem = f"pytest keeps dying in {crashed}"
            break
        if crashed is not None:
            if not _restart_after(runner, state, crashed, loop, storm):
                break
            # Restart without everything recorded so far, and without collecting again
            # the files that have nothing left to run.
            loop.skip_files = files_to_skip([*loop.records, *state.collected],
                                            [n for n in state.collected if n not in loop.records])
            continue
        if runner.step_killed is not None:
            loop.problem = runner.step_killed
            break
        _ended(runner, state, new, loop)
        break
    assert loop.first is not None  # the loop runs at least once
    return PartResult(loop.records, loop.first, loop.problem)


def _take_finished(state: PytestProcess, records: dict[str, TestRecord]) -> int:
    new = 0
    for nodeid, event in state.finished.items():
        if nodeid not in records:
            records[nodeid] = record_of(event)
            new += 1
    return new


def crash_record(state: PytestProcess, nodeid: str, per_test_s: int) -> tuple[TestRecord, str]:
    """The record of the test that killed pytest, and the crash's signature. A crash on a
    signal says where it died in its message (the signature); a limit the backend's test
    broke is its failure, not a crash to blame on the torch under test."""
    message = crash_message(state, per_test_s)
    signature = crash_signature(message, state.tail, nodeid)
    if state.limit_tripped is None and message == describe_signal(state.proc.returncode):
        message = signature
    record = TestRecord(
        nodeid=nodeid,
        outcome=Outcome.FAILED if state.limit_tripped else Outcome.CRASHED,
        message=message,
        details="\n".join(state.tail[-DETAIL_LINES:]),
    )
    return record, signature


def _restart_after(
    runner: Runner, state: PytestProcess, crashed: str, loop: _Loop, storm: CrashStorm
) -> bool:
    """Record the crash; whether pytest is to be started again."""
    record, signature = crash_record(state, crashed, runner.per_test_s)
    loop.records[crashed] = record
    runner.log.write(f"ootci: {crashed} {record.outcome}: {record.message}")
    if runner.step_killed is not None:
        loop.problem = runner.step_killed
        return False
    if runner.remaining_s() <= 0:
        loop.problem = f"timed out after {runner.timeout_s} s"
        return False
    stop = storm.record(signature, crashed)
    if stop is None:
        return True
    storm_signature = signature if storm.counts[signature] >= storm.storm_after else None
    left = not_run(state, loop.records, storm.not_run_message(storm_signature))
    runner.log.write(f"ootci: {stop}; not restarting pytest: {len(left)} test(s) not run")
    return False


def not_run(state: PytestProcess, records: dict[str, TestRecord], message: str) -> list[str]:
    """Record every test the process was about to run and did not as skipped with
    ``message``; the node ids recorded so."""
    left = [n for n in state.collected if n not in records]
    for nodeid in left:
        records[nodeid] = TestRecord(nodeid=nodeid, outcome=Outcome.SKIPPED, message=message)
    return left


def _ended(runner: Runner, state: PytestProcess, new: int, loop: _Loop) -> None:
    """pytest ended outside any test: done, died collecting or at exit, or could not run."""
    proc = state.proc
    signal_text = describe_signal(proc.returncode)
    if signal_text is not None:
        # Died outside any test: while collecting, or after the last one (exit-time
        # teardown of a backend is a real bug too).
        nodeid = SESSION_EXIT_NODEID if state.session_finished else COLLECTION_NODEID
        loop.records[nodeid] = TestRecord(
            nodeid=nodeid,
            outcome=Outcome.CRASHED,
            message=signal_text,
            details="\n".join(state.tail[-DETAIL_LINES:]),
        )
        return
    if proc.returncode not in RAN | {NO_TESTS} and new == 0:
        loop.problem = (
            f"cannot run the test command: {proc.start_error}"
            if proc.start_error
            else f"pytest exited with code {proc.returncode} without running tests"
        )
