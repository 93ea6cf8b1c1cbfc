"""Folding: the collection errors and the exit crash that follow a failed import are that
import's consequences, not breakages of their own (the flat-layout backend's 13 findings)."""

from service.domain.consequences import StepFailure, fold

ROOT = StepFailure("tests/test_a.py", "import",
                   "ModuleNotFoundError: No module named 'torch_flat._C'", "fp-root")


def reimport(path: str) -> StepFailure:
    return StepFailure(path, "import", "RuntimeError: Only a single TORCH_LIBRARY can be used "
                       "to register the namespace triton; please put all of your definitions "
                       "in a single TORCH_LIBRARY block.", f"fp-{path}")


def test_reimport_errors_and_the_exit_crash_fold_into_the_first_import_failure():
    failures = [ROOT, reimport("tests/test_b.py"), reimport("tests/test_c.py"),
                StepFailure("<session exit>", "test", "SIGSEGV", "fp-exit")]
    assert fold(failures) == {1: 0, 2: 0, 3: 0}


def test_the_same_import_failure_in_another_process_folds_by_fingerprint():
    again = StepFailure("tests/test_z.py", "import", ROOT.message, "fp-root")
    assert fold([ROOT, again]) == {1: 0}


def test_an_unrelated_collection_error_and_test_failures_stand_on_their_own():
    syntax = StepFailure("tests/test_b.py", "import", "SyntaxError: invalid syntax", "fp-syntax")
    failed = StepFailure("tests/test_c.py::test_add", "test", "AssertionError", "fp-add")
    assert fold([ROOT, syntax, failed]) == {}


def test_nothing_folds_without_an_import_failure_first():
    # A crash at exit after ordinary test failures is a bug of its own (teardown).
    failed = StepFailure("tests/test_c.py::test_add", "test", "AssertionError", "fp-add")
    assert fold([failed, StepFailure("<session exit>", "test", "SIGSEGV", None)]) == {}
    # A re-import symptom first has no cause before it: it is the first failure shown.
    assert fold([reimport("tests/test_b.py"), reimport("tests/test_c.py")]) == {}


def test_a_failed_import_probe_is_a_cause():
    probe = StepFailure("<import torch>", "import", "ImportError: libopenreg.so: cannot open", None)
    assert fold([probe, reimport("tests/test_b.py")]) == {1: 0}
