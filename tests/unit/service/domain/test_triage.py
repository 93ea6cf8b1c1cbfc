"""The triage cascade and the run-level verdict."""

from __future__ import annotations

import pytest

from service.domain.classify import classify_log, classify_test_failure
from service.domain.triage import SEVERITY, TriageEvidence, run_verdict, triage
from service.domain.verdict import Category, Finding, Stage, Subtype, TriageVerdict

OVERRIDE = ("/src/OpenRegHooks.cpp:10:8: error: ‘bool openreg::OpenRegHooks::"
            "hasPrimaryContext(int) const’ marked ‘override’, but does not override")


def _finding(log: str, stage: Stage = Stage.BUILD) -> Finding:
    finding = classify_log(log, stage)
    assert finding is not None
    return finding


UPSTREAM_BREAK = _finding(OVERRIDE)
DISK = _finding("cp: error writing 'x': No space left on device")
OWN_HEADER = _finding("/src/a.cpp:2:10: fatal error: openreg/api.h: No such file or directory")
NEW_SINCE_GREEN = TriageEvidence(has_last_green_torch=True)


def test_new_break_since_the_last_green_torch_is_upstream() -> None:
    verdict = triage(UPSTREAM_BREAK, NEW_SINCE_GREEN)
    assert (verdict.category, verdict.subtype) == (Category.UPSTREAM, Subtype.SIGNATURE_CHANGED)
    assert "hasPrimaryContext" in verdict.reason and "cxx-override-mismatch" in verdict.reason


def test_failing_on_the_last_green_pin_too_is_pre_existing() -> None:
    evidence = TriageEvidence(failed_on_last_green=True, passed_on_rerun=True,
                              has_last_green_torch=True)
    verdict = triage(UPSTREAM_BREAK, evidence)
    assert verdict.category is Category.BACKEND
    assert verdict.reason.startswith("pre-existing")


def test_passing_on_rerun_is_a_flake() -> None:
    evidence = TriageEvidence(passed_on_rerun=True, has_last_green_torch=True)
    failure = classify_test_failure("tests/test_streams.py::test_query", "assert False", None)
    verdict = triage(failure, evidence)
    assert (verdict.category, verdict.subtype) == (Category.FLAKE, Subtype.TEST_REGRESSION)


@pytest.mark.parametrize(
    "evidence",
    [TriageEvidence(), NEW_SINCE_GREEN, TriageEvidence(failed_on_last_green=True),
     TriageEvidence(passed_on_rerun=True)],
)
def test_infra_signatures_are_infra_whatever_the_history(evidence: TriageEvidence) -> None:
    verdict = triage(DISK, evidence)
    assert (verdict.category, verdict.subtype) == (Category.INFRA, Subtype.DISK)


def test_both_sides_changed() -> None:
    moved = TriageEvidence(has_last_green_torch=True, backend_changed=True)
    assert triage(UPSTREAM_BREAK, moved).category is Category.UNKNOWN
    assert triage(OWN_HEADER, moved).category is Category.BACKEND
    # Only torch moved: even a rule that blames the backend's files is upstream-caused.
    assert triage(OWN_HEADER, NEW_SINCE_GREEN).category is Category.UPSTREAM


def test_without_history_or_evidence_it_is_unknown() -> None:
    no_history = triage(UPSTREAM_BREAK, TriageEvidence())
    assert no_history.category is Category.UNKNOWN
    assert no_history.subtype is Subtype.SIGNATURE_CHANGED
    assert "suggests upstream" in no_history.reason
    nothing = triage(None, NEW_SINCE_GREEN)
    assert (nothing.category, nothing.subtype) == (Category.UNKNOWN, Subtype.GENERIC)


def test_run_verdict_takes_the_worst_failure() -> None:
    verdicts = [
        TriageVerdict(Category.FLAKE, Subtype.TEST_REGRESSION, "passed on rerun"),
        TriageVerdict(Category.UNKNOWN, Subtype.GENERIC, "no rule"),
        TriageVerdict(Category.UPSTREAM, Subtype.CRASH, "new crash"),
        TriageVerdict(Category.INFRA, Subtype.TIMEOUT, "slow"),
        TriageVerdict(Category.UPSTREAM, Subtype.TEST_REGRESSION, "second upstream"),
    ]
    run = run_verdict(verdicts)
    assert run is not None
    assert (run.category, run.subtype) == (Category.UPSTREAM, Subtype.CRASH)
    assert run.reason.startswith("5 failures (2 upstream, 1 infra, 1 flake, 1 unknown)")
    assert run.reason.endswith("worst: new crash")


def test_run_verdict_order_and_empty_run() -> None:
    assert SEVERITY == (Category.UPSTREAM, Category.BACKEND, Category.INFRA, Category.FLAKE,
                        Category.UNKNOWN)
    assert run_verdict([]) is None
    for better, worse in zip(SEVERITY[1:], SEVERITY[:-1], strict=True):
        pair = [TriageVerdict(better, Subtype.GENERIC, "b"),
                TriageVerdict(worse, Subtype.GENERIC, "w")]
        got = run_verdict(pair)
        assert got is not None and got.category is worse


TORCH_ITSELF = ("ootci: torch itself does not import (TORCH_DEVICE_BACKEND_AUTOLOAD=0): "
                "ModuleNotFoundError: No module named 'torch._C'")


def test_a_torch_that_does_not_import_at_provision_is_upstream_without_any_history() -> None:
    verdict = triage(_finding(TORCH_ITSELF, Stage.PROVISION), TriageEvidence())
    assert (verdict.category, verdict.subtype) == (Category.UPSTREAM, Subtype.TORCH_UNUSABLE)
    assert "torch._C" in verdict.reason
    # In the test step the backend has run (its conftest, autoload): history still decides.
    in_tests = triage(_finding(TORCH_ITSELF, Stage.IMPORT), TriageEvidence())
    assert in_tests.category is Category.UNKNOWN
