"""A mechanism that worked in the backend's previous run and fails now is a breakage like
any other (classified, triaged, grouped); one that never worked is not. Real database,
real collect step."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, select

from service.commands.conformance import MechanismCounts, record_conformance
from service.config import Settings
from service.db import session_scope
from service.domain.states import Outcome, StepStatus
from service.models import Breakage, Run, RunState
from tests.support.factories import make_backend, make_finished_run
from workers.pipeline.logs.sink import LogSink
from workers.pipeline.steps.outcome import StepOutcome
from workers.pipeline.testrun.conformance import ConformanceOutcome
from workers.pipeline.testrun.records import TestRecord, TestRunOutcome
from workers.pipeline.verdict import collect
from workers.pipeline.verdict.collect import with_regressions

SUITE = "ootci_conformance/suite"
STREAMS = f"{SUITE}/test_streams.py::test_wait_stream_orders_work"
GENERATOR = f"{SUITE}/test_generator.py::test_manual_seed_reproduces"


def _outcome(tmp_path: Path) -> ConformanceOutcome:
    """Now: streams fails (it worked before), generator fails (it never did)."""
    mechanisms = (
        MechanismCounts("streams", "recommended", 4, 1, 0, (STREAMS,)),
        MechanismCounts("generator", "recommended", 0, 1, 0, (GENERATOR,)),
    )
    records = (
        TestRecord(STREAMS, Outcome.FAILED, message="AssertionError: wait_stream did not order",
                   details=f"{STREAMS}\nE   AssertionError: wait_stream did not order"),
        TestRecord(GENERATOR, Outcome.FAILED, message="NotImplementedError: no generator",
                   details="E   NotImplementedError: no generator"),
    )
    step = StepOutcome(StepStatus.PASSED, 1, "", tmp_path / "conformance.log")
    return ConformanceOutcome(step, "feas", mechanisms, records)


def test_a_regressed_mechanism_opens_a_breakage(engine: Engine, tmp_path: Path) -> None:
    with session_scope(engine) as s:
        feas = make_backend(s, "feas")
        before = make_finished_run(s, feas, spec="pip:torch==2.13.0")
        record_conformance(s, before.id, "feas", [
            MechanismCounts("streams", "recommended", 5, 0, 0, ()),
            MechanismCounts("generator", "recommended", 0, 1, 0, (GENERATOR,)),
        ])
        before.transition(RunState.PASSED)
        now = make_finished_run(s, feas, spec="pip:torch==2.14.1").id

    own = TestRunOutcome(StepOutcome(StepStatus.PASSED, 0, "3 passed"),
                         (TestRecord("tests/test_feas.py::test_ok", Outcome.PASSED),))
    settings = Settings(home=tmp_path / "home")
    with session_scope(engine) as s, LogSink(tmp_path / "collect.log") as sink:
        run = s.get_one(Run, now)
        tests = with_regressions(s, run, own, _outcome(tmp_path), sink.write)
        assert [r.nodeid for r in tests.results] == ["tests/test_feas.py::test_ok", STREAMS]
        state = collect.collect(s, run, StepOutcome(StepStatus.PASSED, 0), tests, settings,
                                sink.write)
        run.transition(state)
    assert "conformance regressions: streams" in (tmp_path / "collect.log").read_text()
    with session_scope(engine) as s:
        assert s.get_one(Run, now).state == RunState.FAILED
        breakages = s.scalars(select(Breakage)).all()
        assert len(breakages) == 1
        assert "test_wait_stream_orders_work" in breakages[0].title


def test_without_a_previous_result_nothing_is_a_regression(engine: Engine, tmp_path: Path) -> None:
    with session_scope(engine) as s:
        run = make_finished_run(s, make_backend(s, "feas"))
        own = TestRunOutcome(StepOutcome(StepStatus.PASSED, 0), ())
        with LogSink(tmp_path / "collect.log") as sink:
            assert with_regressions(s, run, own, _outcome(tmp_path), sink.write) is own
