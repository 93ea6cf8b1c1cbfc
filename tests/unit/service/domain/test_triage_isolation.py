"""Triage with the isolating run's evidence: where the history cannot tell torch from the
backend, this run's backend on the reference torch decides (step 6 of the cascade)."""

from __future__ import annotations

from service.domain.classify import classify_log, classify_test_failure
from service.domain.triage import (
    Isolated,
    IsolationResult,
    RunIdentity,
    TorchIdentity,
    TriageEvidence,
    judge_run,
    triage,
)
from service.domain.verdict import Category, Finding, Stage

OLD = TorchIdentity("2.13.0", "abc1234" + "0" * 33, "a" * 64)
NEW = TorchIdentity("2.15.0", "def5678" + "0" * 33, "b" * 64)
OURS, THEIRS = "9f8e7d6" + "0" * 33, "1a2b3c4" + "0" * 33
NODE = "tests/test_x.py::test_y"
TEST_FAILURE = classify_test_failure(NODE, "TypeError: f() got an unexpected keyword 'n'", None)
# Another rule, naming a symbol: a different fingerprint.
OTHER_FAILURE = classify_test_failure(NODE, "AttributeError: module 'torch' has no attribute "
                                            "'foo'", None)
_BUILD = classify_log("/src/a.cpp:2:10: fatal error: c10/core/Gone.h: No such file or directory",
                      Stage.BUILD)
assert _BUILD is not None
BUILD_FAILURE: Finding = _BUILD

# Both changed since it passed on run #12: the history alone cannot decide.
BOTH_CHANGED = TriageEvidence(this=RunIdentity(20, NEW, OURS),
                              passed=RunIdentity(12, OLD, THEIRS))
FIRST_NIGHT = TriageEvidence(this=RunIdentity(1, NEW, OURS))
WHERE_IT_PASSED = "the torch of run #12 where it passed"


def isolated(outcome: Isolated, nodeid: str | None = NODE, fingerprint: str | None = None,
             line: str = "", reference: str = WHERE_IT_PASSED) -> IsolationResult:
    return IsolationResult(outcome, nodeid=nodeid, backend=OURS, torch=OLD, reference=reference,
                           fingerprint=fingerprint, line=line)


def with_isolation(evidence: TriageEvidence, result: IsolationResult) -> TriageEvidence:
    return TriageEvidence(this=evidence.this, passed=evidence.passed, isolation=result)


def test_history_alone_leaves_both_changed_unknown_and_asks_for_isolation() -> None:
    verdict = triage(TEST_FAILURE, BOTH_CHANGED)
    assert (verdict.category, verdict.needs_isolation, verdict.isolate_against_run_id) == (
        Category.UNKNOWN, True, 12)


def test_it_passes_on_the_torch_it_passed_on_so_torch_is_to_blame() -> None:
    verdict = triage(TEST_FAILURE, with_isolation(BOTH_CHANGED, isolated(Isolated.PASSED)))
    assert verdict.category is Category.UPSTREAM
    assert verdict.reason.startswith(
        "isolated: backend 9f8e7d6 built and ran tests/test_x.py::test_y against torch 2.13.0 "
        "(abc1234, the torch of run #12 where it passed): it passes there, so only torch's "
        "change breaks it; the rule suggests ")
    assert not verdict.needs_isolation and verdict.isolate_against_run_id == 12


def test_it_fails_there_the_same_way_so_the_backend_is_to_blame() -> None:
    result = isolated(Isolated.FAILED, fingerprint=TEST_FAILURE.fingerprint, line="TypeError: x")
    verdict = triage(TEST_FAILURE, with_isolation(FIRST_NIGHT, result))
    assert verdict.category is Category.BACKEND
    assert ("it fails there too (TypeError: x; the same fingerprint), so the backend breaks "
            "it, not torch's change") in verdict.reason
    assert not verdict.needs_isolation


def test_it_fails_there_differently_stays_unknown_and_says_so() -> None:
    result = isolated(Isolated.FAILED, fingerprint=OTHER_FAILURE.fingerprint, line="no attr")
    verdict = triage(TEST_FAILURE, with_isolation(BOTH_CHANGED, result))
    assert verdict.category is Category.UNKNOWN
    assert "it fails there differently (no attr); the isolation does not tell" in verdict.reason
    # The experiment ran: nothing more to isolate.
    assert not verdict.needs_isolation


def test_an_isolation_that_could_not_run_stays_unknown_and_says_why() -> None:
    why = "no other torch to isolate against: this run is on the only pin"
    verdict = triage(TEST_FAILURE, with_isolation(FIRST_NIGHT, IsolationResult.not_run(why)))
    assert verdict.category is Category.UNKNOWN and verdict.needs_isolation
    assert verdict.reason.startswith(f"not isolated: {why}; no earlier run of this backend")


def test_a_build_that_builds_on_the_reference_torch_is_upstream() -> None:
    result = isolated(Isolated.PASSED, nodeid=None, reference="pin 'installed'")
    verdict = triage(BUILD_FAILURE, with_isolation(FIRST_NIGHT, result))
    assert verdict.category is Category.UPSTREAM
    assert verdict.reason.startswith(
        "isolated: backend 9f8e7d6 built against torch 2.13.0 (abc1234, pin 'installed'): "
        "it builds there, so only torch's change breaks it")
    same = isolated(Isolated.FAILED, nodeid=None, fingerprint=BUILD_FAILURE.fingerprint,
                    line="fatal error")
    assert triage(BUILD_FAILURE, with_isolation(FIRST_NIGHT, same)).category is Category.BACKEND


def test_failures_no_rule_names_cannot_be_compared() -> None:
    result = isolated(Isolated.FAILED, nodeid=None, line="build exited with 1")
    verdict = triage(None, with_isolation(FIRST_NIGHT, result))
    assert verdict.category is Category.UNKNOWN
    assert "no rule names either failure" in verdict.reason


def test_isolation_never_overrides_a_history_that_decides() -> None:
    """Only torch changed since it passed: upstream, whatever an isolation would say."""
    only_torch = TriageEvidence(this=RunIdentity(20, NEW, OURS), passed=RunIdentity(12, OLD, OURS),
                                isolation=isolated(Isolated.FAILED,
                                                   fingerprint=TEST_FAILURE.fingerprint))
    assert triage(TEST_FAILURE, only_torch).category is Category.UPSTREAM
    flaky = TriageEvidence(this=FIRST_NIGHT.this, passed_on_rerun=True,
                           isolation=isolated(Isolated.PASSED))
    assert triage(TEST_FAILURE, flaky).category is Category.FLAKE


def test_an_isolated_upstream_failure_speaks_for_the_run() -> None:
    up = triage(TEST_FAILURE, with_isolation(BOTH_CHANGED, isolated(Isolated.PASSED)))
    mine = triage(OTHER_FAILURE, with_isolation(FIRST_NIGHT, isolated(
        Isolated.FAILED, fingerprint=OTHER_FAILURE.fingerprint, line="assert 1 == 2")))
    assert judge_run([mine, up], passed=False).verdict == "upstream"
