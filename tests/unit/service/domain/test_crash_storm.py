"""Crash signatures and the storm rule: a cause that crashes test after test ends the step
after three crashes, not after every test has paid an interpreter start."""

from service.domain.crash_storm import CrashStorm, crash_signature, innermost_frame

SEEDED_SEGFAULT = """\
Fatal Python error: Segmentation fault

Current thread 0x00007f3a5c9b8740 (most recent call first):
  File "/root/.ootci/cache/envs/ab12/lib/python3.11/site-packages/torch/random.py", line 46 in manual_seed
  File "/tmp/run-7/src/tests/test_ops.py", line 12 in test_add
  File "/root/.ootci/cache/envs/ab12/lib/python3.11/site-packages/_pytest/python.py", line 159 in pytest_pyfunc_call

Extension modules: torch._C (total: 1)
""".splitlines()


def test_the_innermost_frame_names_where_it_died_independent_of_the_env_path():
    assert innermost_frame(SEEDED_SEGFAULT) == "torch/random.py:manual_seed"
    elsewhere = [line.replace("/root/.ootci/cache/envs/ab12", "/opt/venv") for line in SEEDED_SEGFAULT]
    assert innermost_frame(elsewhere) == innermost_frame(SEEDED_SEGFAULT)


def test_two_tests_crashing_in_the_same_frame_share_a_signature():
    a = crash_signature("SIGSEGV", SEEDED_SEGFAULT, "tests/test_ops.py::test_add")
    b = crash_signature("SIGSEGV", SEEDED_SEGFAULT, "tests/test_nn.py::test_linear")
    assert a == b == "SIGSEGV in torch/random.py:manual_seed"


def test_without_a_stack_the_crashing_test_function_is_the_signature():
    no_stack = ["Fatal Python error: Aborted", ""]
    a = crash_signature("SIGABRT", no_stack, "tests/test_ops.py::test_op[float32]")
    b = crash_signature("SIGABRT", no_stack, "tests/test_ops.py::test_op[float64]")
    c = crash_signature("SIGABRT", no_stack, "tests/test_ops.py::test_other")
    assert a == b != c


def test_a_different_signal_is_a_different_crash():
    assert crash_signature("SIGSEGV", SEEDED_SEGFAULT, "t::a") != crash_signature(
        "SIGABRT", SEEDED_SEGFAULT, "t::a")


def test_the_third_crash_with_one_signature_is_a_storm_and_names_the_first():
    storm = CrashStorm()
    assert storm.record("SIGSEGV in torch/random.py:manual_seed", "t::a") is None
    assert storm.record("SIGABRT in test t::x", "t::x") is None
    assert storm.record("SIGSEGV in torch/random.py:manual_seed", "t::b") is None
    reason = storm.record("SIGSEGV in torch/random.py:manual_seed", "t::c")
    assert reason is not None and "3 tests crashed the same way" in reason and "first t::a" in reason
    assert storm.not_run_message("SIGSEGV in torch/random.py:manual_seed") == "not run: same crash as t::a"


def test_different_crashes_stop_at_the_restart_budget():
    storm = CrashStorm(restart_budget=5)
    reasons = [storm.record(f"SIGSEGV in test t::{i}", f"t::{i}") for i in range(5)]
    assert reasons[:4] == [None] * 4
    assert reasons[4] is not None and "restart budget" in reasons[4]
    assert storm.not_run_message(None).startswith("not run: the step's restart budget")


def test_the_crashing_thread_is_named_not_the_first_thread_dumped():
    # faulthandler dumps every thread; pytest-timeout's timer thread may come first.
    dump = [
        "Fatal Python error: Segmentation fault",
        "",
        "Thread 0x00007f3a4b7fe640 (most recent call first):",
        '  File "/usr/lib/python3.11/threading.py", line 331 in wait',
        '  File "/usr/lib/python3.11/threading.py", line 1412 in run',
        "",
        *SEEDED_SEGFAULT[2:],
    ]
    assert innermost_frame(dump) == "torch/random.py:manual_seed"
    assert innermost_frame(dump[:6]) == "python3.11/threading.py:wait"
