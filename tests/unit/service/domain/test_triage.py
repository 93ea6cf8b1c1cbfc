"""The triage cascade and the run-level verdict."""

from __future__ import annotations

import pytest

from service.domain.classify import classify_log, classify_test_failure
from service.domain.triage import (
    COMPATIBLE,
    SEVERITY,
    RunIdentity,
    TorchIdentity,
    TriageEvidence,
    judge_run,
    run_verdict,
    triage,
)
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
TEST_FAILURE = classify_test_failure("tests/test_streams.py::test_query", "assert False", None)

OLD = TorchIdentity("2.13.0", "abc1234" + "0" * 33, "a" * 64)
NEW = TorchIdentity("2.15.0", "def5678" + "0" * 33, "b" * 64)
OURS, THEIRS = "9f8e7d6" + "0" * 33, "1a2b3c4" + "0" * 33


def run(run_id: int, torch: TorchIdentity | None = NEW, backend: str | None = OURS) -> RunIdentity:
    return RunIdentity(run_id, torch, backend)


def since(passed: RunIdentity, this: RunIdentity, **more: object) -> TriageEvidence:
    return TriageEvidence(this=this, passed=passed, **more)  # type: ignore[arg-type]


def test_only_torch_changed_since_the_test_passed_is_upstream_and_says_which_runs() -> None:
    verdict = triage(UPSTREAM_BREAK, since(run(12, OLD), run(20)))
    assert (verdict.category, verdict.subtype) == (Category.UPSTREAM, Subtype.SIGNATURE_CHANGED)
    assert verdict.reason.startswith(
        "passed on run #12 (torch 2.13.0 abc1234, backend 9f8e7d6); only torch changed: "
        "2.13.0 abc1234 → 2.15.0 def5678; the rule suggests upstream: ")
    assert "hasPrimaryContext" in verdict.reason and "cxx-override-mismatch" in verdict.reason
    assert not verdict.needs_isolation
    # Whatever the rule says: a backend-blaming rule on a torch-only change is upstream's.
    assert triage(OWN_HEADER, since(run(12, OLD), run(20))).category is Category.UPSTREAM


def test_a_long_red_test_elsewhere_does_not_stop_a_torch_only_break_being_upstream() -> None:
    """The backend never had a fully green run (one test red since forever): the new break
    of another test is still upstream, and the run says so."""
    red_forever = triage(TEST_FAILURE, TriageEvidence(
        this=run(20), failed_before=(run(19, OLD), run(3, OLD))))
    new_break = triage(UPSTREAM_BREAK, since(run(19, OLD), run(20)))
    assert red_forever.category is Category.BACKEND
    assert red_forever.reason.startswith("pre-existing: the same failure is on run #19")
    assert new_break.category is Category.UPSTREAM
    judged = judge_run([red_forever, new_break], passed=False)
    assert judged.verdict == "upstream"


def test_only_the_backend_changed_on_the_same_torch_is_backend() -> None:
    verdict = triage(UPSTREAM_BREAK, since(run(12, NEW, THEIRS), run(20)))
    assert verdict.category is Category.BACKEND
    assert "only the backend changed: 1a2b3c4 → 9f8e7d6" in verdict.reason
    assert "the rule suggests upstream" in verdict.reason


def test_a_break_keeps_its_blame_on_the_nights_it_persists() -> None:
    """Compared with where it first failed, not with tonight: the backend moving on after
    an upstream break does not turn it into 'both changed'."""
    evidence = since(run(12, OLD), run(30, TorchIdentity("2.16.0", "f" * 40), THEIRS),
                     broke=run(15, NEW, OURS))
    verdict = triage(UPSTREAM_BREAK, evidence)
    assert verdict.category is Category.UPSTREAM
    assert verdict.reason.startswith(
        "passed on run #12 (torch 2.13.0 abc1234, backend 9f8e7d6); first failed on run #15 "
        "(torch 2.15.0 def5678, backend 9f8e7d6); only torch changed: ")


def test_this_run_against_where_it_passed_decides_before_where_it_first_broke() -> None:
    """It first failed when both moved; tonight the old backend fails on the new torch:
    tonight isolates it."""
    evidence = since(run(12, OLD, THEIRS), run(20, NEW, THEIRS), broke=run(15, NEW, OURS))
    verdict = triage(TEST_FAILURE, evidence)
    assert verdict.category is Category.UPSTREAM and not verdict.needs_isolation
    assert "only torch changed" in verdict.reason and "run #15" not in verdict.reason


def test_a_failure_since_on_the_very_torch_and_backend_it_passed_on_is_nondeterministic() -> None:
    evidence = since(run(12, OLD), run(20), broke=run(15, OLD))
    verdict = triage(TEST_FAILURE, evidence)
    assert verdict.category is Category.FLAKE
    assert ("it failed on run #15 with the same torch and same backend as run #12 where it "
            "passed: nondeterministic") in verdict.reason


def test_neither_changed_is_nondeterministic() -> None:
    verdict = triage(TEST_FAILURE, since(run(12), run(20)))
    assert verdict.category is Category.FLAKE
    assert ("it failed on run #20 with the same torch and same backend as run #12 where it "
            "passed: nondeterministic") in verdict.reason


def test_a_rebuilt_wheel_of_the_same_commit_is_a_torch_change() -> None:
    rebuilt = TorchIdentity(NEW.version, NEW.git_version, "c" * 64)
    verdict = triage(TEST_FAILURE, since(run(12, rebuilt), run(20)))
    assert verdict.category is Category.UPSTREAM
    assert "rebuilt: wheel sha256 ccccccc → bbbbbbb" in verdict.reason
    # An unknown sha256 is not a difference.
    unknown = TorchIdentity(NEW.version, NEW.git_version, None)
    assert triage(TEST_FAILURE, since(run(12, unknown), run(20))).category is Category.FLAKE


def test_both_changed_needs_isolation_against_the_torch_it_passed_on() -> None:
    verdict = triage(OWN_HEADER, since(run(12, OLD, THEIRS), run(20)))
    assert verdict.category is Category.UNKNOWN
    assert verdict.needs_isolation and verdict.isolate_against_run_id == 12
    assert ("both changed: torch 2.13.0 abc1234 → 2.15.0 def5678, backend 1a2b3c4 → 9f8e7d6"
            in verdict.reason)
    assert "needs isolation: a run of this backend on torch 2.13.0 abc1234" in verdict.reason
    assert "the rule suggests backend" in verdict.reason


def test_an_earlier_run_that_isolates_a_both_changed_failure_decides_it() -> None:
    passed, this = run(12, OLD, THEIRS), run(20)
    # Tonight's backend on the torch it passed on already failed the same way: the backend.
    pin = triage(UPSTREAM_BREAK, since(passed, this, failed_before=(run(18, OLD, OURS),)))
    assert pin.category is Category.BACKEND and not pin.needs_isolation
    assert "pre-existing: the same failure is on run #18 (torch 2.13.0 abc1234" in pin.reason
    # The backend it passed with, on tonight's torch, failed the same way: upstream.
    other = triage(OWN_HEADER, since(passed, this, failed_before=(run(19, NEW, THEIRS),)))
    assert other.category is Category.UPSTREAM
    assert ("the same failure is on run #19 (torch 2.15.0 def5678, backend 1a2b3c4), where "
            "only torch changed: 2.13.0 abc1234 → 2.15.0 def5678") in other.reason
    # A failure on tonight's own torch and backend isolates nothing.
    same = triage(OWN_HEADER, since(passed, this, failed_before=(run(19, NEW, OURS),)))
    assert same.category is Category.UNKNOWN and same.needs_isolation


def test_pre_existing_on_the_same_torch_is_backend_and_names_that_run() -> None:
    evidence = TriageEvidence(this=run(20), failed_before=(run(19, NEW, THEIRS), run(7, OLD)))
    verdict = triage(UPSTREAM_BREAK, evidence)
    assert verdict.category is Category.BACKEND
    assert verdict.reason.startswith(
        "pre-existing: the same failure is on run #19 (torch 2.15.0 def5678, backend 1a2b3c4), "
        "on this same torch")
    assert "green" not in verdict.reason


def test_a_first_night_needs_isolation_with_nothing_to_isolate_against() -> None:
    verdict = triage(UPSTREAM_BREAK, TriageEvidence(this=run(1)))
    assert (verdict.category, verdict.subtype) == (Category.UNKNOWN, Subtype.SIGNATURE_CHANGED)
    assert verdict.needs_isolation and verdict.isolate_against_run_id is None
    assert "no earlier run of this backend where it passed" in verdict.reason
    assert "the rule suggests upstream" in verdict.reason


def test_passing_on_rerun_is_a_flake_whatever_changed() -> None:
    evidence = since(run(12, OLD), run(20), passed_on_rerun=True)
    verdict = triage(TEST_FAILURE, evidence)
    assert (verdict.category, verdict.subtype) == (Category.FLAKE, Subtype.TEST_REGRESSION)
    assert verdict.reason.startswith("passed on rerun")


@pytest.mark.parametrize(
    "evidence",
    [TriageEvidence(), since(run(12, OLD), run(20)), TriageEvidence(this=run(2),
     failed_before=(run(1),)), TriageEvidence(passed_on_rerun=True)],
)
def test_infra_signatures_are_infra_whatever_the_history(evidence: TriageEvidence) -> None:
    verdict = triage(DISK, evidence)
    assert (verdict.category, verdict.subtype) == (Category.INFRA, Subtype.DISK)


def test_a_failure_no_rule_names_is_still_blamed_on_what_changed() -> None:
    verdict = triage(None, since(run(12, OLD), run(20)))
    assert (verdict.category, verdict.subtype) == (Category.UPSTREAM, Subtype.GENERIC)
    assert verdict.reason.endswith("no rule matched its log")
    nothing = triage(None, TriageEvidence())
    assert (nothing.category, nothing.subtype) == (Category.UNKNOWN, Subtype.GENERIC)


def test_run_verdict_takes_the_worst_failure() -> None:
    verdicts = [
        TriageVerdict(Category.FLAKE, Subtype.TEST_REGRESSION, "passed on rerun"),
        TriageVerdict(Category.UNKNOWN, Subtype.GENERIC, "no rule"),
        TriageVerdict(Category.UPSTREAM, Subtype.CRASH, "new crash"),
        TriageVerdict(Category.INFRA, Subtype.TIMEOUT, "slow"),
        TriageVerdict(Category.UPSTREAM, Subtype.TEST_REGRESSION, "second upstream"),
    ]
    run_ = run_verdict(verdicts)
    assert run_ is not None
    assert (run_.category, run_.subtype) == (Category.UPSTREAM, Subtype.CRASH)
    assert run_.reason.startswith("5 failures (2 upstream, 1 unknown, 1 infra, 1 flake)")
    assert run_.reason.endswith("worst: new crash")


def test_run_verdict_order_and_empty_run() -> None:
    assert SEVERITY == (Category.UPSTREAM, Category.BACKEND, Category.UNKNOWN, Category.INFRA,
                        Category.FLAKE)
    assert run_verdict([]) is None
    for better, worse in zip(SEVERITY[1:], SEVERITY[:-1], strict=True):
        pair = [TriageVerdict(better, Subtype.GENERIC, "b"),
                TriageVerdict(worse, Subtype.GENERIC, "w")]
        got = run_verdict(pair)
        assert got is not None and got.category is worse


def test_a_passed_run_is_compatible() -> None:
    assert judge_run([], passed=True).verdict == COMPATIBLE == "compatible"
    flaky = TriageVerdict(Category.FLAKE, Subtype.TEST_REGRESSION, "passed on rerun")
    judged = judge_run([flaky], passed=True)
    assert (judged.verdict, judged.subtype, judged.reason) == (
        "compatible", None, "passed; 1 flaky test passed on rerun")
    # A nondeterministic failure nothing cleared fails the run, as a flake.
    assert judge_run([flaky], passed=False).verdict == "flake"


TORCH_ITSELF = ("ootci: torch itself does not import (TORCH_DEVICE_BACKEND_AUTOLOAD=0): "
                "ModuleNotFoundError: No module named 'torch._C'")


def test_a_torch_that_does_not_import_at_provision_is_upstream_without_any_history() -> None:
    verdict = triage(_finding(TORCH_ITSELF, Stage.PROVISION), TriageEvidence())
    assert (verdict.category, verdict.subtype) == (Category.UPSTREAM, Subtype.TORCH_UNUSABLE)
    assert "torch._C" in verdict.reason
    # In the test step the backend has run (its conftest, autoload): history still decides.
    in_tests = triage(_finding(TORCH_ITSELF, Stage.IMPORT), TriageEvidence(this=run(1)))
    assert in_tests.category is Category.UNKNOWN and in_tests.needs_isolation
