"""Build and test each fixture backend against the installed torch through the real steps:
real CMake + g++, real PrivateUse1 registrations, real segfaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.domain.states import StepStatus
from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.logs.sink import LogSink
from workers.pipeline.steps.build import build
from workers.pipeline.steps.outcome import StepOutcome
from workers.pipeline.steps.recipe import load_recipe
from workers.pipeline.testrun.records import TestRunOutcome
from workers.pipeline.testrun.runner import TestRunOptions, run_tests

pytest_plugins = ["tests.support.installed_fixtures"]
pytestmark = pytest.mark.slow

BACKENDS = Path(__file__).resolve().parents[1] / "fixtures" / "backends"


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("builds")


def do_build(
    name: str, env: TorchEnv, builds: Path, timeout_s: int = 600
) -> tuple[StepOutcome, Path]:
    build_dir = builds / name
    with LogSink(builds / f"{name}.build.log") as log:
        outcome = build(load_recipe(BACKENDS / name), env, build_dir, log, timeout_s=timeout_s)
    return outcome, build_dir


def do_test(name: str, env: TorchEnv, build_dir: Path, work: Path) -> TestRunOutcome:
    with LogSink(work / "test.log") as log:
        return run_tests(
            load_recipe(BACKENDS / name),
            env,
            work,
            log,
            TestRunOptions(timeout_s=600, per_test_timeout_s=300, build_dir=build_dir),
        )


def test_tiny_backend_builds_and_its_suite_passes(
    installed: TorchEnv, builds: Path, tmp_path: Path
) -> None:
    outcome, build_dir = do_build("tiny", installed, builds)
    log = outcome.log_path.read_text() if outcome.log_path else ""
    assert outcome.status is StepStatus.PASSED, log[-3000:]
    assert (build_dir / "libtiny_backend.so").is_file()
    assert f"torch {installed.version} from {installed.torch_dir}" in log

    result = do_test("tiny", installed, build_dir, tmp_path)
    assert result.step.status is StepStatus.PASSED, (tmp_path / "test.log").read_text()[-3000:]
    assert {r.outcome for r in result.results} == {"passed"}
    assert len(result.results) == 7
    assert "tests/test_tiny.py::test_copy_to_device_and_back_keeps_values" in {
        r.nodeid for r in result.results
    }
    assert (tmp_path / "junit.xml").is_file()

    # Same (torch, backend) build dir again: an incremental no-op, not a rebuild.
    again, _ = do_build("tiny", installed, builds)
    assert again.status is StepStatus.PASSED
    assert "ninja: no work to do" in (builds / "tiny.build.log").read_text()


def test_broken_backend_fails_to_build_with_the_compiler_error(
    installed: TorchEnv, builds: Path
) -> None:
    outcome, _ = do_build("broken_compile", installed, builds)
    assert outcome.status is StepStatus.FAILED
    assert outcome.exit_code not in (0, None)
    assert outcome.summary == f"build exited with {outcome.exit_code}"
    log = (builds / "broken_compile.build.log").read_text()
    assert "marked 'override', but does not override" in log
    assert "csrc/hooks.cpp:" in log


def test_segfaulting_suite_records_every_test(
    installed: TorchEnv, builds: Path, tmp_path: Path
) -> None:
    outcome, build_dir = do_build("segfault", installed, builds)
    assert outcome.status is StepStatus.PASSED

    result = do_test("segfault", installed, build_dir, tmp_path)
    by_name = {r.nodeid.split("::")[-1]: r for r in result.results}
    assert {name: r.outcome for name, r in by_name.items()} == {
        "test_a1_device_guard_registered": "passed",
        "test_a2_reads_valid_pointer": "passed",
        "test_a3_segfaults_in_cpp": "crashed",
        "test_a4_after_crash_passes": "passed",
        "test_a5_hangs": "crashed",
        "test_a6_after_hang_fails": "failed",
        "test_a7_after_hang_passes": "passed",
        "test_b1_passes": "passed",
        "test_b2_skipped": "skipped",
    }
    segv = by_name["test_a3_segfaults_in_cpp"]
    # The signal and the innermost Python frame: the backend's function that called in.
    assert segv.message == "Segmentation fault (SIGSEGV) in segfault_backend/__init__.py:read_device_pointer"
    assert "read_device_pointer" in (segv.details or "")  # faulthandler's Python stack
    # The recipe's limit; pytest-timeout normally fires, ootci's watchdog if the box is slow.
    assert (by_name["test_a5_hangs"].message or "").startswith("timed out after 3 s")
    assert "a real failure, not a crash" in (by_name["test_a6_after_hang_fails"].message or "")
    assert result.step.status is StepStatus.FAILED
    assert result.step.summary == "5 passed, 1 failed, 2 crashed, 1 skipped"


def test_build_timeout_errors_and_keeps_the_log(installed: TorchEnv, tmp_path: Path) -> None:
    with LogSink(tmp_path / "build.log") as log:
        outcome = build(load_recipe(BACKENDS / "tiny"), installed, tmp_path / "b", log, timeout_s=1)
    assert outcome.status is StepStatus.ERRORED
    assert outcome.summary == "timed out after 1 s"
    text = (tmp_path / "build.log").read_text()
    assert "ootci: building tiny" in text and "killing" in text
