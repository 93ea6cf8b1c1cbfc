"""Quarantine in the collect step (issue #30 item 5): a test failing 2 in 10 runs is listed
flaky and quarantined, and a run where only it fails is green with the failure kept and
marked; a quarantined test opens no breakage; K clean runs release it."""

from __future__ import annotations

from sqlalchemy import Engine, delete, func, select

from service.commands.flaky import quarantine
from service.config import Settings
from service.db import session_scope
from service.domain.states import Outcome, StepStatus
from service.models import (
    AuditEntry,
    Backend,
    Breakage,
    Failure,
    Quarantine,
    Run,
    RunState,
    TestResult,
)
from service.queries.flaky import flaky_tests
from tests.support.factories import make_backend, make_finished_run, make_torch_build
from workers.pipeline.steps.outcome import StepOutcome
from workers.pipeline.testrun.records import TestRecord, TestRunOutcome
from workers.pipeline.verdict.collect import conclude, triage_failures

SETTINGS = Settings(flaky_window=20, flaky_quarantine_rate=0.1, flaky_release_after=3)
PATIENT = Settings(flaky_window=20, flaky_quarantine_rate=0.1, flaky_release_after=10)
PASSED_BUILD = StepOutcome(StepStatus.PASSED, 0)
FLIP = "tests/test_ops.py::test_flip"
OK = "tests/test_ops.py::test_ok"


def night(
    engine: Engine, failing: set[str], *, git: str = "a" * 40, settings: Settings = SETTINGS
) -> int:
    """A run of the backend on the torch build of upstream ``git``: OK and FLIP, those in
    ``failing`` failed."""
    records = tuple(
        TestRecord(n, Outcome.FAILED if n in failing else Outcome.PASSED, 0.1,
                   "AssertionError: assert 1 == 2" if n in failing else None)
        for n in (OK, FLIP))
    with session_scope(engine) as s:
        b = s.scalar(select(Backend).limit(1)) or make_backend(s, "acme")
        run = make_finished_run(s, b)
        run.torch_build_id = make_torch_build(s, git).id
        s.add_all(TestResult(run_id=run.id, nodeid=r.nodeid, suite=r.suite, outcome=r.outcome,
                             duration_s=0.1, message=r.message) for r in records)
        s.flush()
        step = StepOutcome(StepStatus.FAILED if failing else StepStatus.PASSED, 1 if failing else 0)
        tests = TestRunOutcome(step, records)
        triaged = triage_failures(s, run, PASSED_BUILD, tests)
        run.transition(conclude(s, run, triaged, PASSED_BUILD, tests, settings, lambda _t: None))
        return run.id


def test_a_test_failing_2_in_10_runs_is_flaky_quarantined_and_its_run_green(
    engine: Engine,
) -> None:
    ids = [night(engine, {FLIP} if i in (2, 6) else set(), settings=PATIENT) for i in range(10)]
    with session_scope(engine) as s:
        states = [s.get_one(Run, i).state for i in ids]
        # Its first failure fails the run (one failure is an incident) and is triaged a flake
        # (nothing changed since it passed); the second, after it recovered, quarantines it.
        assert states[2] == RunState.FAILED
        assert states[6] == RunState.PASSED
        second = s.get_one(Run, ids[6])
        assert second.verdict == "compatible" and "1 quarantined failure" in (
            second.verdict_reason or "")
        kept = s.scalars(select(Failure).where(Failure.run_id == ids[6])).one()
        assert kept.nodeid == FLIP and kept.quarantined and kept.breakage_id is None
        # The first failure's breakage is not fed by the quarantined one.
        assert s.scalars(select(Breakage)).one().occurrences == 1
        held = s.scalars(select(Quarantine)).one()
        assert (held.nodeid, held.reason) == (FLIP, "auto")
        rows = flaky_tests(s, 20)
        assert [(r.nodeid, r.stat.not_passed, r.stat.runs) for r in rows] == [(FLIP, 2, 10)]
        assert rows[0].stat.rate == 0.2 and rows[0].quarantine is not None
        assert held.clean_runs == 3  # nights 7..9


def test_k_clean_runs_release_it_and_a_failure_in_between_starts_over(engine: Engine) -> None:
    for fails in ({FLIP}, set(), {FLIP}):
        night(engine, fails)
    with session_scope(engine) as s:
        assert s.scalars(select(Quarantine)).one().clean_runs == 0
    night(engine, set())
    night(engine, set())
    night(engine, {FLIP})  # starts over
    with session_scope(engine) as s:
        assert s.scalars(select(Quarantine)).one().clean_runs == 0
    for _ in range(3):
        night(engine, set())
    with session_scope(engine) as s:
        assert s.scalar(select(func.count()).select_from(Quarantine)) == 0
        actions = [(a.actor, a.action) for a in s.scalars(select(AuditEntry).order_by(AuditEntry.id))]
        assert actions == [("ootci:flaky", "flaky.quarantine"), ("ootci:flaky", "flaky.release")]


def test_a_quarantined_test_broken_by_torch_opens_no_breakage_and_fails_no_run(
    engine: Engine,
) -> None:
    night(engine, set(), git="a" * 40)
    with session_scope(engine) as s:
        quarantine(s, "acme", FLIP, actor="cli:me@here")
    red = night(engine, {FLIP}, git="c" * 40)  # torch moved: would be an upstream breakage
    with session_scope(engine) as s:
        run = s.get_one(Run, red)
        assert run.state == RunState.PASSED
        failure = s.scalars(select(Failure).where(Failure.run_id == red)).one()
        assert failure.quarantined and failure.triage == "upstream"
        assert failure.breakage_id is None
        assert s.scalar(select(func.count()).select_from(Breakage)) == 0
    # Control: the same break on another test, not quarantined, opens one and fails the run.
    with session_scope(engine) as s:
        s.execute(delete(Quarantine))
    again = night(engine, {FLIP}, git="d" * 40)
    with session_scope(engine) as s:
        assert s.get_one(Run, again).state == RunState.FAILED
        assert s.scalar(select(func.count()).select_from(Breakage)) == 1
