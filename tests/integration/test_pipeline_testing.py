"""The test step against small real suites: real pytest processes that really segfault,
abort, hang and fail, run through ``run_tests`` with the installed interpreter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.domain.states import StepStatus
from tests.support.suites import make_suite, run
from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.testrun.records import TestRunOutcome
from workers.pipeline.testrun.runner import (
    COLLECTION_NODEID,
    RESULTS_FILE,
    SESSION_EXIT_NODEID,
)

pytest_plugins = ["tests.support.installed_fixtures"]


def outcomes(result: TestRunOutcome) -> dict[str, str]:
    return {r.nodeid.split("::")[-1]: r.outcome for r in result.results}


CRASHY = """
    import ctypes, os

    def test_1_passes():
        pass

    def test_2_segfaults():
        ctypes.string_at(0)

    def test_3_passes():
        pass

    def test_4_aborts():
        os.abort()

    def test_5_passes():
        pass
"""


def test_crashes_cost_one_result_each(installed: TorchEnv, tmp_path: Path) -> None:
    suite = make_suite(
        tmp_path, {"test_crashy.py": CRASHY, "test_later.py": "def test_later():\n    pass\n"}
    )
    result = run(suite, installed, tmp_path)

    assert outcomes(result) == {
        "test_1_passes": "passed",
        "test_2_segfaults": "crashed",
        "test_3_passes": "passed",
        "test_4_aborts": "crashed",
        "test_5_passes": "passed",
        "test_later": "passed",
    }
    crashed = {r.nodeid.split("::")[-1]: r for r in result.results if r.outcome == "crashed"}
    # The signal and where it died (faulthandler's innermost frame): the crash's signature.
    assert crashed["test_2_segfaults"].message == (
        "Segmentation fault (SIGSEGV) in ctypes/__init__.py:string_at")
    assert crashed["test_4_aborts"].message == "Aborted (SIGABRT) in tests/test_crashy.py:test_4_aborts"
    # faulthandler's traceback names the crashing test.
    assert "Fatal Python error: Segmentation fault" in (crashed["test_2_segfaults"].details or "")
    assert "test_2_segfaults" in (crashed["test_2_segfaults"].details or "")
    assert result.step.status is StepStatus.FAILED
    assert result.step.exit_code == -11  # the first pytest process
    assert result.step.summary == "4 passed, 2 crashed"
    # Three pytest processes (crash, crash, rest); only the one that lived wrote its JUnit.
    work = tmp_path / "work"
    assert not (work / "junit.xml").exists() and (work / "junit.2.xml").is_file()
    # The JSONL holds a started line for every test, finished lines for all but the crashes.
    events = [json.loads(line) for line in (work / RESULTS_FILE).read_text().splitlines()]
    started = [e["nodeid"] for e in events if e["event"] == "started"]
    finished = {e["nodeid"] for e in events if e["event"] == "finished"}
    assert len(started) == 6 and len(finished) == 4


def test_only_runs_the_named_tests_through_a_crash(installed: TorchEnv, tmp_path: Path) -> None:
    suite = make_suite(
        tmp_path, {"test_crashy.py": CRASHY, "test_later.py": "def test_later():\n    pass\n"}
    )
    result = run(suite, installed, tmp_path, rerun_failures=False, only=[
        "tests/test_crashy.py::test_2_segfaults", "tests/test_crashy.py::test_5_passes",
    ])
    # The restart after the segfault stays limited to what was asked.
    assert outcomes(result) == {"test_2_segfaults": "crashed", "test_5_passes": "passed"}
    assert result.step.summary == "1 passed, 1 crashed"


@pytest.mark.slow
def test_hang_holding_the_gil_is_killed_by_the_watchdog(
    installed: TorchEnv, tmp_path: Path
) -> None:
    # PyDLL keeps the GIL through the C call, so pytest-timeout's thread never gets to run:
    # only ootci's own watchdog can end this test.
    hang = """
        import ctypes

        def test_before():
            pass

        def test_hangs_in_c():
            ctypes.PyDLL(None).sleep(600)

        def test_after():
            pass
    """
    suite = make_suite(tmp_path, {"test_hang.py": hang}, timeout_per_test=2)
    result = run(suite, installed, tmp_path)
    assert outcomes(result) == {
        "test_before": "passed",
        "test_hangs_in_c": "crashed",
        "test_after": "passed",
    }
    hung = next(r for r in result.results if r.outcome == "crashed")
    assert hung.message == "timed out after 2 s (killed by ootci)"


@pytest.mark.slow
@pytest.mark.parametrize("autoload", [True, False])
def test_python_hang_is_stopped_by_pytest_timeout(
    installed: TorchEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autoload: bool
) -> None:
    if not autoload:  # a CI that pins its plugins: pytest-timeout must still be loaded
        monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    hang = """
        import time

        def test_sleeps():
            time.sleep(600)

        def test_after():
            pass
    """
    suite = make_suite(tmp_path, {"test_hang.py": hang}, timeout_per_test=60)
    # The operator's cap (2 s) is below the recipe's 60 s: the smaller one applies.
    result = run(suite, installed, tmp_path, per_test_timeout_s=2)
    assert outcomes(result) == {"test_sleeps": "crashed", "test_after": "passed"}
    hung = next(r for r in result.results if r.outcome == "crashed")
    if hung.message == "timed out after 2 s":
        assert "time.sleep(600)" in (hung.details or "")  # pytest-timeout's stack dump
    else:  # on a loaded machine ootci's backstop may get there first
        assert hung.message == "timed out after 2 s (killed by ootci)"


FLAKY = """
    from pathlib import Path

    MARK = Path(__file__).with_name("flaky.mark")

    def test_flaky():
        if not MARK.exists():
            MARK.write_text("failed once")
            raise AssertionError("first run fails")

    def test_really_broken():
        assert 1 == 2, "always"

    def test_fine():
        pass
"""


@pytest.mark.parametrize("rerun", [True, False])
def test_failures_are_rerun_once(installed: TorchEnv, tmp_path: Path, rerun: bool) -> None:
    suite = make_suite(tmp_path, {"test_flaky.py": FLAKY})
    result = run(suite, installed, tmp_path, rerun_failures=rerun)
    expected = {
        "test_flaky": "flaky" if rerun else "failed",
        "test_really_broken": "failed",
        "test_fine": "passed",
    }
    assert outcomes(result) == expected
    broken = next(r for r in result.results if r.nodeid.endswith("test_really_broken"))
    assert broken.message is not None and "AssertionError: always" in broken.message
    assert broken.details is not None and "assert 1 == 2" in broken.details
    if rerun:
        flaky = next(r for r in result.results if r.outcome == "flaky")
        assert flaky.message == "passed on rerun; first run: AssertionError: first run fails"
        assert (tmp_path / "work" / "junit.rerun.xml").is_file()
    assert result.step.status is StepStatus.FAILED


def test_import_errors_are_results(installed: TorchEnv, tmp_path: Path) -> None:
    broken = """
        raise ImportError(
            "/site-packages/torch_acme/_C.so: undefined symbol: _ZN3c1013MessageLoggerC1EPKcii"
        )
    """
    suite = make_suite(
        tmp_path,
        {"test_broken.py": broken, "test_ok.py": "def test_ok():\n    pass\n", "conftest.py": ""},
    )
    result = run(suite, installed, tmp_path)
    records = {r.nodeid: r for r in result.results}
    assert records["tests/test_broken.py"].outcome == "error"
    assert "undefined symbol: _ZN3c1013MessageLoggerC1EPKcii" in (
        records["tests/test_broken.py"].message or ""
    )
    assert records["tests/test_ok.py::test_ok"].outcome == "passed"
    assert result.step.status is StepStatus.FAILED


def test_crash_during_collection_is_recorded(installed: TorchEnv, tmp_path: Path) -> None:
    suite = make_suite(tmp_path, {"test_dies_on_import.py": "import os\nos.abort()\n"})
    result = run(suite, installed, tmp_path)
    assert [(r.nodeid, r.outcome, r.message) for r in result.results] == [
        (COLLECTION_NODEID, "crashed", "Aborted (SIGABRT)")
    ]
    assert result.step.status is StepStatus.FAILED


@pytest.mark.slow
def test_step_timeout_errors_and_keeps_results(installed: TorchEnv, tmp_path: Path) -> None:
    slow = """
        import time

        def test_quick():
            pass

        def test_slow():
            time.sleep(120)
    """
    suite = make_suite(tmp_path, {"test_slow.py": slow})
    result = run(suite, installed, tmp_path, timeout_s=20)
    assert outcomes(result) == {"test_quick": "passed", "test_slow": "crashed"}
    assert result.step.status is StepStatus.ERRORED
    assert result.step.summary.startswith("timed out after 20 s")


def test_nothing_collected_fails(installed: TorchEnv, tmp_path: Path) -> None:
    suite = make_suite(tmp_path, {"helpers.py": "X = 1\n"})
    result = run(suite, installed, tmp_path)
    assert result.results == ()
    assert (result.step.status, result.step.summary) == (
        StepStatus.FAILED,
        "no tests were collected",
    )


def test_pytest_usage_error_is_an_errored_step(installed: TorchEnv, tmp_path: Path) -> None:
    command = '["{python}", "-m", "pytest", "tests", "--no-such-option"]'
    suite = make_suite(tmp_path, {"test_ok.py": "def test_ok():\n    pass\n"}, command=command)
    result = run(suite, installed, tmp_path)
    assert result.step.status is StepStatus.ERRORED
    assert "exited with code 4" in result.step.summary
    assert "--no-such-option" in (tmp_path / "test.log").read_text()


def test_missing_python_is_an_errored_step(tmp_path: Path, installed: TorchEnv) -> None:
    from dataclasses import replace

    suite = make_suite(tmp_path, {"test_ok.py": "def test_ok():\n    pass\n"})
    gone = replace(installed, python=tmp_path / "no-python")
    result = run(suite, gone, tmp_path)
    assert result.step.status is StepStatus.ERRORED
    assert result.step.summary.startswith("cannot run the test command: [Errno 2] No such file")


def test_every_pytest_outcome_maps_to_one_record(installed: TorchEnv, tmp_path: Path) -> None:
    suite_body = """
        import pytest

        @pytest.fixture
        def broken_setup():
            raise RuntimeError("setup exploded")

        @pytest.fixture
        def broken_teardown():
            yield
            raise RuntimeError("teardown exploded")

        def test_skip():
            pytest.skip("not on this device")

        @pytest.mark.xfail(reason="known gap")
        def test_xfail():
            assert False

        @pytest.mark.xfail(reason="fixed upstream")
        def test_xpass():
            pass

        def test_setup_error(broken_setup):
            pass

        def test_teardown_error(broken_teardown):
            pass

        @pytest.mark.parametrize("n", [1, 2])
        def test_param(n):
            assert n == 1
    """
    suite = make_suite(tmp_path, {"test_outcomes.py": suite_body})
    result = run(suite, installed, tmp_path, rerun_failures=False)
    records = {r.nodeid.split("::")[-1]: r for r in result.results}
    assert {k: r.outcome for k, r in records.items()} == {
        "test_skip": "skipped",
        "test_xfail": "skipped",
        "test_xpass": "passed",
        "test_setup_error": "error",
        "test_teardown_error": "error",
        "test_param[1]": "passed",
        "test_param[2]": "failed",
    }
    assert records["test_skip"].message == "Skipped: not on this device"
    assert records["test_setup_error"].message == "RuntimeError: setup exploded"
    assert records["test_teardown_error"].message == "RuntimeError: teardown exploded"
    assert all(r.duration_s is not None and r.duration_s >= 0 for r in result.results)


def test_crash_after_the_last_test_is_recorded(installed: TorchEnv, tmp_path: Path) -> None:
    # A backend whose teardown at interpreter exit aborts: every test passed, yet the
    # process died; that must not read as green.
    conftest = """
        import os

        def pytest_unconfigure(config):
            os.abort()
    """
    suite = make_suite(
        tmp_path, {"conftest.py": conftest, "test_ok.py": "def test_ok():\n    pass\n"}
    )
    result = run(suite, installed, tmp_path)
    assert [(r.nodeid, r.outcome, r.message) for r in result.results] == [
        ("tests/test_ok.py::test_ok", "passed", None),
        (SESSION_EXIT_NODEID, "crashed", "Aborted (SIGABRT)"),
    ]
    assert result.step.status is StepStatus.FAILED


UNDEFINED_EXT = """\
#include <Python.h>
namespace c10 {
// Declared by the torch the backend was built for; the installed libc10 does not have it.
void* getPrivateUse1DeviceAllocatorLegacy();
}
static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
PyMODINIT_FUNC PyInit__C() {
  c10::getPrivateUse1DeviceAllocatorLegacy();
  return PyModule_Create(&module);
}
"""


def _installed_backend(site: Path, python: Path) -> None:
    """A backend torch autoloads (a dist-info entry point), whose extension references a
    c10 symbol the installed libc10 lacks: the loader refuses it at import."""
    import subprocess
    import sysconfig

    pkg = site / "vendor_backend"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from vendor_backend import _C\n\ndef _autoload():\n    pass\n")
    info = site / "vendor_backend-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vendor_backend\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[torch.backends]\nvendor = vendor_backend:_autoload\n")
    (site / "ext.cpp").write_text(UNDEFINED_EXT)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    subprocess.run(["g++", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}",
                    str(site / "ext.cpp"), "-o", str(pkg / f"_C{suffix}")], check=True)


def _import_finding(record: object) -> object:
    from service.domain.classify import classify_test_failure
    from service.domain.verdict import Stage

    return classify_test_failure(record.nodeid, record.message, record.details,  # type: ignore[attr-defined]
                                 Stage.IMPORT, outcome=record.outcome)  # type: ignore[attr-defined]


def test_an_autoloaded_backend_that_fails_to_load_is_reported_by_its_innermost_cause(
    installed: TorchEnv, tmp_path: Path
) -> None:
    """pytest's conftest shows only torch's "Failed to load the backend extension"; the
    probe runs from a neutral directory with -P, so the backend's *source tree* (the suite's
    working directory, with an unbuilt package of the same name) cannot shadow the installed
    backend, and it reports the loader's own words with the demangled symbol."""
    from dataclasses import replace

    site = tmp_path / "site"
    _installed_backend(site, installed.python)
    suite = make_suite(tmp_path, {"test_ok.py": "def test_ok():\n    pass\n"})
    (suite / "tests" / "conftest.py").write_text("import torch\n")
    decoy = suite / "vendor_backend"  # the source tree: importing it gives a circular import
    decoy.mkdir()
    (decoy / "__init__.py").write_text("from vendor_backend import _C\n")
    env = replace(installed, pythonpath=(site, *installed.pythonpath))
    result = run(suite, env, tmp_path)

    assert result.step.status is StepStatus.FAILED
    (record,) = result.results
    assert record.outcome == "error" and "::" not in record.nodeid
    assert "undefined symbol: _ZN3c1035getPrivateUse1DeviceAllocatorLegacyEv" in (record.message or "")
    assert "partially initialized" not in (record.details or "")
    finding = _import_finding(record)
    assert (finding.category.value, finding.subtype.value, finding.rule) == (  # type: ignore[attr-defined]
        "upstream", "link-abi", "import-undefined-symbol")
    assert finding.captures["demangled"] == "c10::getPrivateUse1DeviceAllocatorLegacy()"  # type: ignore[attr-defined]


def test_a_torch_that_does_not_import_by_itself_is_upstream_torch_unusable(
    installed: TorchEnv, tmp_path: Path
) -> None:
    from dataclasses import replace

    broken = tmp_path / "broken"
    broken.mkdir()
    # A dependency torch imports first, too old for it: torch fails before any backend.
    (broken / "typing_extensions.py").write_text("# an old release\n")
    suite = make_suite(tmp_path, {"test_ok.py": "def test_ok():\n    pass\n"})
    (suite / "tests" / "conftest.py").write_text("import torch\n")
    result = run(suite, replace(installed, pythonpath=(broken, *installed.pythonpath)), tmp_path)

    (record,) = result.results
    finding = _import_finding(record)
    assert (finding.category.value, finding.subtype.value) == ("upstream", "torch-unusable")  # type: ignore[attr-defined]
    assert finding.captures["exception"] == "ImportError"  # type: ignore[attr-defined]
    assert "typing_extensions" in finding.captures["cause"]  # type: ignore[attr-defined]


def _tiny_wheel(dest: Path, name: str) -> Path:
    import zipfile

    path = dest / f"{name}-1.0-py3-none-any.whl"
    dist = f"{name}-1.0.dist-info"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{name}/__init__.py", "READY = True\n")
        zf.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        zf.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                    "Root-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{dist}/RECORD", "")
    return path


USES_TESTDEP = """
    from ootci_testdep_probe import READY

    def test_dependency_is_there():
        assert READY
"""


def test_the_recipes_test_requires_are_installed_before_the_suite(
    installed: TorchEnv, tmp_path: Path
) -> None:
    wheel = _tiny_wheel(tmp_path, "ootci_testdep_probe")
    suite = make_suite(tmp_path, {"test_dep.py": USES_TESTDEP})
    with (suite / "ootci.toml").open("a") as recipe:
        recipe.write(f'requires = ["{wheel}"]\n')
    result = run(suite, installed, tmp_path)
    assert outcomes(result) == {"test_dependency_is_there": "passed"}


def test_test_requires_already_in_the_env_start_no_pip(installed: TorchEnv, tmp_path: Path) -> None:
    # pytest is in the env (the suite runs on it): nothing for pip to do, so pip is not
    # started; a version the env does not have still goes to pip (which fails: no network).
    suite = make_suite(tmp_path, {"test_ok.py": "def test_ok():\n    pass\n"})
    with (suite / "ootci.toml").open("a") as recipe:
        recipe.write('requires = ["pytest>=7", "expecttest"]\n')
    result = run(suite, installed, tmp_path)
    log = (tmp_path / "test.log").read_text()
    assert outcomes(result) == {"test_ok": "passed"}
    assert "test requirements are in the env already: pytest>=7 expecttest" in log
    assert " -m pip install" not in log
    # pytest-timeout found by the same probe of the env, and loaded
    assert "pytest-timeout not in the env" not in log and "timeout: 60.0s" in log

    (suite / "ootci.toml").write_text((suite / "ootci.toml").read_text().replace(
        '"pytest>=7"', '"pytest<1"'))
    result = run(suite, installed, tmp_path / "again")
    log = (tmp_path / "again" / "test.log").read_text()
    assert "installing the suite's test requirements: pytest<1 expecttest" in log
    assert " -m pip install" in log


def test_a_missing_test_dependency_is_the_environments_not_upstreams(
    installed: TorchEnv, tmp_path: Path
) -> None:
    from service.domain.classify import classify_test_failure
    from service.domain.verdict import Stage

    suite = make_suite(tmp_path, {"test_dep.py": USES_TESTDEP.replace("probe", "absent")})
    result = run(suite, installed, tmp_path)
    (record,) = result.results
    finding = classify_test_failure(record.nodeid, record.message, record.details, Stage.IMPORT,
                                    outcome=record.outcome)
    assert (finding.category.value, finding.subtype.value) == ("infra", "environment")
    assert finding.captures["module"] == "ootci_testdep_absent"


def test_a_collection_error_says_how_many_tests_it_hid(installed: TorchEnv, tmp_path: Path) -> None:
    hiding = """
        import ootci_not_installed_anywhere

        def test_one():
            pass

        @pytest.mark.parametrize("n", [1, 2])
        def test_two(n):
            pass

        class TestGroup:
            def test_three(self):
                pass

            def helper(self):
                pass
    """
    suite = make_suite(tmp_path, {"test_hiding.py": hiding, "test_ok.py": "def test_ok():\n    pass\n"})
    result = run(suite, installed, tmp_path)
    records = {r.nodeid: r for r in result.results}
    hidden = records["tests/test_hiding.py"]
    assert hidden.outcome == "error"
    assert "ootci: this collection error hid 3 test(s) of tests/test_hiding.py" in (hidden.details or "")
    assert records["tests/test_ok.py::test_ok"].outcome == "passed"
    assert result.step.status is StepStatus.FAILED
