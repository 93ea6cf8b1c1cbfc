"""The restart loop's stop logic: a storm of alike crashes, or the restart budget, ends the
step with the tests left recorded as not run; anything less restarts pytest as before.

A scripted runner plays pytest processes (what the plugin would have written for each: the
tests collected after deselection, started, finished) so every branch is cheap; the real
processes are ``tests/integration/test_pipeline_crash_storm.py``'s."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from service.domain.crash_storm import CrashStorm
from service.domain.states import Outcome
from workers.pipeline.isolation.procs import ProcResult
from workers.pipeline.logs.sink import LogSink
from workers.pipeline.testrun.process import PytestProcess
from workers.pipeline.testrun.restarts import run_until_done

SEGV = -11
SUITE = [f"tests/test_seed.py::test_{i}" for i in range(10)]


def _dump(function: str) -> list[str]:
    return [
        "Fatal Python error: Segmentation fault",
        "",
        "Current thread 0x00007f3a5c9b8740 (most recent call first):",
        f'  File "/env/lib/python3.11/site-packages/torch/random.py", line 46 in {function}',
        '  File "/run/src/tests/test_seed.py", line 4 in test_x',
    ]


class ScriptedRunner:
    """Plays one pytest process per ``run``: the suite minus the deselected tests, up to
    the first that ``crashes`` (its faulthandler dump, or None for a pass)."""

    def __init__(self, work_dir: Path, log: LogSink,
                 crashes: Callable[[str], list[str] | None]) -> None:
        self.work_dir, self.log, self.crashes = work_dir, log, crashes
        self.per_test_s, self.timeout_s, self.attempt = 60, 600, 0
        self.only: list[str] | None = None
        self.step_killed: str | None = None

    def remaining_s(self) -> float:
        return 600.0

    def run(self, junit: Path, *, deselect: Iterable[str] = (),
            select: Iterable[str] | None = None,
            skip_files: Iterable[str] = ()) -> PytestProcess:
        self.attempt += 1
        skip, skipped_files = set(deselect), set(skip_files)
        collected = [n for n in SUITE if n not in skip and n.split("::")[0] not in skipped_files]
        state = PytestProcess(ProcResult(0, 0.1), [], collected=collected)
        for nodeid in collected:
            state.started.append(nodeid)
            dump = self.crashes(nodeid)
            if dump is not None:
                state.proc, state.tail = ProcResult(SEGV, 0.1), dump
                return state
            state.finished[nodeid] = {"nodeid": nodeid, "outcome": "passed"}
        state.session_finished = True
        return state


def _run(tmp_path: Path, crashes: Callable[[str], list[str] | None],
         budget: int = 50) -> tuple[ScriptedRunner, dict[str, tuple[str, str | None]]]:
    with LogSink(tmp_path / "test.log") as log:
        runner = ScriptedRunner(tmp_path, log, crashes)
        result = run_until_done(runner, CrashStorm(restart_budget=budget))
    assert result.problem is None  # the crashes are results: the step fails, not errors
    return runner, {n: (r.outcome, r.message) for n, r in result.records.items()}


def test_the_third_alike_crash_ends_the_step_and_the_rest_is_not_run(tmp_path: Path) -> None:
    runner, records = _run(tmp_path, lambda nodeid: _dump("manual_seed"))

    assert runner.attempt == 3
    crash = "Segmentation fault (SIGSEGV) in torch/random.py:manual_seed"
    assert records == {
        **{n: (Outcome.CRASHED, crash) for n in SUITE[:3]},
        **{n: (Outcome.SKIPPED, f"not run: same crash as {SUITE[0]}") for n in SUITE[3:]},
    }
    assert "crash storm: 3 tests crashed the same way" in (tmp_path / "test.log").read_text()


def test_two_alike_crashes_restart_as_before(tmp_path: Path) -> None:
    runner, records = _run(
        tmp_path, lambda nodeid: _dump("manual_seed") if nodeid in SUITE[2:4] else None)

    assert runner.attempt == 3
    assert [records[n][0] for n in SUITE] == [Outcome.PASSED] * 2 + [Outcome.CRASHED] * 2 + [
        Outcome.PASSED] * 6


def test_different_crashes_stop_at_the_restart_budget(tmp_path: Path) -> None:
    # Each test dies in a function of its own: no storm, only the budget stops them.
    runner, records = _run(tmp_path, lambda nodeid: _dump(f"op_{nodeid[-1]}"), budget=4)

    assert runner.attempt == 4
    assert [records[n][0] for n in SUITE] == [Outcome.CRASHED] * 4 + [Outcome.SKIPPED] * 6
    assert records[SUITE[4]][1] == "not run: the step's restart budget was spent on crashes"
