"""classify_test_failure: one JUnit record -> one Finding."""

from __future__ import annotations

from service.domain.classify import classify_test_failure
from service.domain.verdict import Category, Finding, Stage, Subtype

NODE = "tests/test_generator.py::test_default_generator"


def test_plain_assertion_is_a_test_regression_named_by_the_test() -> None:
    finding = classify_test_failure(NODE, "AssertionError: assert 3 == 4",
                                    "def test():\n>   assert 3 == 4\nE   assert 3 == 4")
    assert (finding.category, finding.subtype) == (Category.UPSTREAM, Subtype.TEST_REGRESSION)
    assert finding.captures["test"] == NODE
    assert finding.stage is Stage.TEST and finding.fingerprint


def test_crashed_outcome_is_a_crash_even_without_a_message() -> None:
    finding = classify_test_failure(NODE, None, None, outcome="crashed")
    assert (finding.subtype, finding.rule) == (Subtype.CRASH, "test-crashed")
    assert finding.line == f"{NODE} crashed"


def test_fatal_signal_in_the_output_is_a_crash() -> None:
    details = ("Fatal Python error: Aborted\n\nCurrent thread 0x00007f (most recent call "
               "first):\n  File \"/x/tests/test_generator.py\", line 9 in test_default_generator")
    finding = classify_test_failure(NODE, "worker crashed", details, outcome="failed")
    assert (finding.subtype, finding.rule) == (Subtype.CRASH, "py-fatal-signal")
    assert finding.captures["signal"] == "Aborted"
    assert finding.captures["test"] == NODE


def test_messages_refine_the_subtype() -> None:
    hook = classify_test_failure(
        NODE, "RuntimeError: You should register `PrivateUse1HooksInterface`by "
              "`RegisterPrivateUse1HooksInterface` and implement `getDefaultGenerator` "
              "at the same time for PrivateUse1.", None)
    assert hook.subtype is Subtype.NEW_HOOK_REQUIRED
    assert hook.captures["hook"] == "getDefaultGenerator"

    dtype = classify_test_failure(
        NODE, "RuntimeError: expected scalar type Float but found dtype 'BFloat16'", None)
    assert dtype.subtype is Subtype.NEW_DTYPE_CHECK

    removed = classify_test_failure(
        NODE, "AttributeError: module 'torch.utils' has no attribute 'rename_backend'", None)
    assert (removed.subtype, removed.captures["symbol"]) == (
        Subtype.SYMBOL_REMOVED, "rename_backend")

    # An AttributeError on the backend's own module is not an upstream API removal.
    own = classify_test_failure(
        NODE, "AttributeError: module 'torch_openreg' has no attribute 'foo'", None)
    assert own.subtype is Subtype.TEST_REGRESSION

    timeout = classify_test_failure(NODE, "Failed: Timeout (>30.0s) from pytest-timeout.", None)
    assert (timeout.category, timeout.subtype) == (Category.INFRA, Subtype.TIMEOUT)


def test_huge_details_are_bounded() -> None:
    details = "noise line\n" * 500_000 + "E   AssertionError: assert 1 == 2\n"
    finding = classify_test_failure(NODE, None, details)
    assert finding.subtype is Subtype.TEST_REGRESSION
    assert len(finding.line) < 3000


def test_the_runners_own_crash_and_timeout_messages() -> None:
    # What workers/pipeline/testrun/runner.py records for a test that killed pytest or hung.
    crash = classify_test_failure(NODE, "Segmentation fault (SIGSEGV)", None, outcome="crashed")
    assert (crash.subtype, crash.rule, crash.captures["signal"]) == (
        Subtype.CRASH, "crash-signal", "Segmentation fault")
    hung = classify_test_failure(NODE, "timed out after 30 s (killed by ootci)", None,
                                 outcome="crashed")
    assert (hung.category, hung.subtype, hung.captures["limit"]) == (
        Category.INFRA, Subtype.TIMEOUT, "30")
    module = classify_test_failure(
        NODE, "RuntimeError: Try to call torch.openreg.is_current_stream_capturing. The "
              "backend must register a custom backend module with "
              "`torch._register_device_module('openreg', BackendModule)`.", None)
    assert (module.subtype, module.captures["hook"]) == (
        Subtype.NEW_HOOK_REQUIRED, "is_current_stream_capturing")


def test_collection_error_with_an_undefined_symbol_is_link_abi() -> None:
    # pytest's longrepr for a test module whose import loads a backend .so that needs a
    # symbol the installed libtorch lacks (the pipeline classifies it at the import stage).
    details = (
        "ImportError while importing test module '/w/backend/tests/test_memory.py'.\n"
        "Hint: make sure your test modules/packages have valid Python names.\n"
        "Traceback:\n"
        "backend/tests/test_memory.py:3: in <module>\n"
        "    import torch_openreg\n"
        "E   ImportError: /w/backend/torch_openreg/lib/libtorch_openreg.so: undefined symbol: "
        "_ZN2at26registerHostAllocatorStatsEN3c1010DeviceTypeEPNS_13HostAllocatorE\n"
    )
    finding = classify_test_failure("backend/tests/test_memory.py", None, details,
                                    Stage.IMPORT, outcome="error")
    assert (finding.stage, finding.subtype, finding.rule) == (
        Stage.IMPORT, Subtype.LINK_ABI, "import-undefined-symbol")
    assert "registerHostAllocatorStats" in finding.captures["symbol"]


def test_an_added_dtype_check_is_new_dtype_check() -> None:
    finding = classify_test_failure(
        NODE, "RuntimeError: Unsupported dtype: float64 (Double) dtype is not supported by "
              "this device", None)
    assert finding.subtype is Subtype.NEW_DTYPE_CHECK


def test_a_c10_interface_default_that_refuses_is_a_new_hook_the_backend_lacks() -> None:
    # The default bodies of c10's DeviceGuardImplInterface and DeviceAllocator virtuals:
    # torch calls a virtual the backend's guard or allocator does not override (the real
    # cases are golden logs in tests/fixtures/logs/releases/).
    guard = classify_test_failure(
        NODE, "RuntimeError: Backend doesn't support getting device capabilities.", None)
    assert (guard.subtype, guard.rule) == (Subtype.NEW_HOOK_REQUIRED, "py-interface-default-refuses")
    assert guard.captures["feature"] == "getting device capabilities"
    allocator = classify_test_failure(
        NODE, "NotImplementedError: getMemoryInfo is not implemented for this allocator yet.",
        None)
    assert (allocator.subtype, allocator.captures["hook"]) == (Subtype.NEW_HOOK_REQUIRED,
                                                                "getMemoryInfo")
    # A backend's own "doesn't support" in an assertion is no interface default.
    own = classify_test_failure(NODE, "AssertionError: the backend doesn't support it", None)
    assert own.subtype is Subtype.TEST_REGRESSION


def test_crashes_with_one_signature_share_a_fingerprint_in_any_test() -> None:
    # The test step's crash message is the crash's signature (testrun/restarts.py).
    def crash(nodeid: str, where: str) -> Finding:
        return classify_test_failure(
            nodeid, f"Segmentation fault (SIGSEGV) in {where}",
            "Fatal Python error: Segmentation fault\n", outcome="crashed")

    seeded = [crash(f"tests/test_{name}.py::test_{name}", "torch/random.py:manual_seed")
              for name in ("add", "conv")]
    elsewhere = crash("tests/test_add.py::test_add", "torch/nn/functional.py:linear")
    assert {f.fingerprint for f in seeded} != {elsewhere.fingerprint}
    assert len({f.fingerprint for f in seeded}) == 1
    assert seeded[0].captures["crash"] == (
        "Segmentation fault (SIGSEGV) in torch/random.py:manual_seed")
    assert (seeded[0].rule, seeded[0].subtype) == ("crash-signal", Subtype.CRASH)
