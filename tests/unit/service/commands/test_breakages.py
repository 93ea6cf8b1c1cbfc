"""Failures group into breakages across nights; a fix resolves them; reclassify replays."""

from __future__ import annotations

from sqlalchemy import Engine, select, update

from service.commands.breakages import record_occurrences
from service.config import Settings
from service.db import session_scope
from service.domain.states import Outcome, StepStatus
from service.models import (
    Backend,
    Breakage,
    BreakageStatus,
    Failure,
    OutboxKind,
    OutboxMessage,
    Run,
    RunState,
    TestResult,
    TorchBuild,
)
from tests.support.factories import make_backend, make_finished_run
from tests.support.helpers import fixture_log
from workers.pipeline.steps.outcome import StepOutcome
from workers.pipeline.testrun.records import TestRecord, TestRunOutcome
from workers.pipeline.verdict.collect import collect
from workers.pipeline.verdict.reclassify import reclassify

SETTINGS = Settings(pins=["pip:torch==2.13.0"])
FAILED_BUILD = StepOutcome(StepStatus.FAILED, 1, "build failed")
PASSED_BUILD = StepOutcome(StepStatus.PASSED, 0)
PASSED_TESTS = TestRunOutcome(StepOutcome(StepStatus.PASSED, 0), ())


def _night(engine: Engine, log: str | None, sha: str = "b" * 40) -> int:
    with session_scope(engine) as s:
        b = s.scalar(select(Backend).limit(1)) or make_backend(s)
        run = make_finished_run(s, b, build_log=fixture_log(log) if log else None, sha=sha)
        state = collect(s, run, FAILED_BUILD if log else PASSED_BUILD,
                        None if log else PASSED_TESTS, SETTINGS, lambda _t: None)
        run.transition(state)
        return run.id


def test_three_nights_of_one_break_are_one_breakage_then_a_fix_resolves_it(engine: Engine) -> None:
    green = _night(engine, None)
    reds = [_night(engine, "build_allocator_const.log") for _ in range(3)]
    with session_scope(engine) as s:
        assert s.get_one(Run, green).state == RunState.PASSED
        breakages = s.scalars(select(Breakage)).all()
        assert len(breakages) == 1
        b = breakages[0]
        assert b.occurrences == 3 and b.status == BreakageStatus.OPEN
        assert (b.first_seen_run_id, b.last_seen_run_id) == (reds[0], reds[-1])
        assert b.subtype == "signature-changed" and "allocate" in b.title
        failures = s.scalars(select(Failure).order_by(Failure.id)).all()
        assert {f.breakage_id for f in failures} == {b.id}
        # Same backend sha as the last green run, torch moved: upstream's doing.
        assert {f.triage for f in failures} == {"upstream"}
        assert s.get_one(Run, reds[0]).verdict == "upstream"
    fixed = _night(engine, None)
    with session_scope(engine) as s:
        b = s.scalars(select(Breakage)).one()
        assert b.status == BreakageStatus.RESOLVED and b.resolved_by_run_id == fixed


def test_a_different_symbol_is_a_different_breakage(engine: Engine) -> None:
    _night(engine, None)
    _night(engine, "build_allocator_const.log")
    _night(engine, "build_new_pure_virtual.log")
    with session_scope(engine) as s:
        subtypes = sorted(b.subtype or "" for b in s.scalars(select(Breakage)))
        assert subtypes == ["new-pure-virtual", "signature-changed"]


def test_reclassify_rewrites_stale_verdicts_and_regroups(engine: Engine) -> None:
    _night(engine, None)
    for _ in range(2):
        _night(engine, "build_header_moved.log")
    with session_scope(engine) as s:
        # What an older rules.toml might have stored: a generic verdict, another fingerprint.
        s.execute(update(Failure).values(category="unknown", subtype="generic", fingerprint="old"))
        s.execute(update(Breakage).values(fingerprint="old", subtype="generic"))
    with session_scope(engine) as s:
        report = reclassify(s, SETTINGS)
    assert report.changed == 2 and report.failures_after == 2
    with session_scope(engine) as s:
        failures = s.scalars(select(Failure)).all()
        assert {(f.category, f.subtype) for f in failures} == {("upstream", "header-moved")}
        assert all(f.captures.get("header") for f in failures)
        (b,) = s.scalars(select(Breakage)).all()
        assert b.occurrences == 2 and b.subtype == "header-moved"


def _torch_night(engine: Engine, version: str, git: str, sha: str, log: str | None) -> int:
    """A nightly of torch ``version`` built from ``git``, the backend at ``sha``."""
    with session_scope(engine) as s:
        b = s.scalar(select(Backend).limit(1)) or make_backend(s)
        tb = s.scalar(select(TorchBuild).where(TorchBuild.git_version == git)) or TorchBuild(
            spec="nightly", source_kind="nightly", version=version, git_version=git)
        s.add(tb)
        s.flush()
        run = make_finished_run(s, b, build_log=fixture_log(log) if log else None, sha=sha)
        run.torch_build_id = tb.id
        s.flush()
        s.refresh(run)
        state = collect(s, run, FAILED_BUILD if log else PASSED_BUILD,
                        None if log else PASSED_TESTS, SETTINGS, lambda _t: None)
        run.transition(state)
        return run.id


def test_a_breakage_reads_as_its_latest_triage_and_an_upstream_turn_asks_for_suspects(
    engine: Engine,
) -> None:
    old, new = "a" * 40, "b" * 40
    _torch_night(engine, "2.14.0.dev1", old, "1" * 40, None)
    # Torch and backend both moved: nobody can be blamed yet.
    both = _torch_night(engine, "2.14.0.dev2", new, "2" * 40, "build_allocator_const.log")
    with session_scope(engine) as s:
        (b,) = s.scalars(select(Breakage)).all()
        (f,) = s.get_one(Run, both).failures
        assert (b.category, f.triage, f.needs_isolation) == ("unknown", "unknown", True)
        assert f.isolate_against_run_id == both - 1
        assert b.culprits_note == "not analysed: a unknown break, not upstream's"
        assert (b.range_base_sha, b.range_head_sha) == (old, new)
    # The old backend on the new torch fails the same way: only torch changed since it passed.
    _torch_night(engine, "2.14.0.dev2", new, "1" * 40, "build_allocator_const.log")
    with session_scope(engine) as s:
        b = s.scalars(select(Breakage)).one()
        assert b.category == "upstream" and b.occurrences == 2
        assert b.culprits_note == "waiting for the range's commits from GitHub"
        asked = s.scalars(select(OutboxMessage).where(OutboxMessage.breakage_id == b.id)).all()
        assert [m.kind for m in asked] == [OutboxKind.CULPRIT]


def _tested_night(engine: Engine, nodeid: str) -> int:
    """A run whose one test failed, stored under ``nodeid``."""
    failed = TestRecord(nodeid, Outcome.FAILED, 0.1, "AssertionError: assert 1 == 2")
    with session_scope(engine) as s:
        b = s.scalar(select(Backend).limit(1)) or make_backend(s)
        run = make_finished_run(s, b)
        s.add(TestResult(run_id=run.id, nodeid=nodeid, suite="test_x", outcome=failed.outcome,
                         duration_s=0.1, message=failed.message))
        tests = TestRunOutcome(StepOutcome(StepStatus.FAILED, 1, "1 failed"), (failed,))
        run.transition(collect(s, run, PASSED_BUILD, tests, SETTINGS, lambda _t: None))
        return run.id


def test_reclassify_rekeys_node_ids_stored_with_a_run_trees_location(engine: Engine) -> None:
    stable = "tests/test_x.py::test_y"
    _tested_night(engine, f".ootci/cache/sources/pyonly/nogit-{'a1' * 8}/{stable}")
    _tested_night(engine, stable)
    with session_scope(engine) as s:
        assert len(s.scalars(select(Breakage)).all()) == 2  # one id per tree: two histories
        reclassify(s, SETTINGS)
    with session_scope(engine) as s:
        assert set(s.scalars(select(TestResult.nodeid))) == {stable}
        assert set(s.scalars(select(Failure.nodeid))) == {stable}
        (b,) = s.scalars(select(Breakage)).all()
        assert b.occurrences == 2 and b.title == f"test-regression: {stable}"


def test_a_breakage_title_names_no_path_of_one_machine(engine: Engine) -> None:
    with session_scope(engine) as s:
        run = make_finished_run(s, make_backend(s))
        line = ("/home/ci/.ootci/cache/envs/3f2a/lib/python3.11/site-packages/torch/"
                "__init__.py:12: RuntimeError in /home/ci/.ootci/work/runs/7/build/x.so")
        failure = Failure(run_id=run.id, step_name="test", stage="test", nodeid=None, line=line,
                          captures={}, subtype="generic", triage="unknown",
                          fingerprint="f" * 32, fingerprint_version=2)
        s.add(failure)
        s.flush()
        (b,) = record_occurrences(s, run, [failure])
        assert b.title == "generic: <site>/torch/__init__.py:12: RuntimeError in <path>/x.so"
