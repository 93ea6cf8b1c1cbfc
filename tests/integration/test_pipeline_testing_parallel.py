"""The parallel test step against a real suite that aborts, hangs, fails, flakes and does not
import: split over two pytest processes it records what the serial step records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.commands.runs import create_run, get_or_create_backend
from service.config import Settings
from service.db import make_engine, session_scope
from service.migrate import upgrade
from service.models import Run, TestResult
from tests.support.pyonly import write_pyonly_backend
from tests.support.suites import make_suite, run
from workers.pipeline.execute import execute_run
from workers.pipeline.isolation.child_env import ChildEnvPolicy, child_environment
from workers.pipeline.testrun.records import TestRunOutcome
from workers.pipeline.testrun.runner import RESULTS_FILE

pytest_plugins = ["tests.support.dirs", "tests.support.installed_fixtures"]

SUITE = {
    "test_a_plain.py": """
        import os

        import pytest

        def test_passes():
            # The step's child environment policy reaches every part's pytest.
            assert os.environ["HOME"].endswith("policy-home")

        def test_fails():
            assert 1 == 2, "always"

        @pytest.mark.skip(reason="not on this device")
        def test_skipped():
            pass
    """,
    "test_b_aborts.py": """
        import os

        def test_before_abort():
            pass

        def test_aborts():
            os.abort()

        def test_after_abort():
            pass
    """,
    "test_c_hangs.py": """
        import time

        def test_before_hang():
            pass

        def test_hangs():
            time.sleep(600)

        def test_after_hang():
            pass
    """,
    "test_d_flaky.py": """
        from pathlib import Path

        MARK = Path(__file__).with_name("flaky.mark")

        def test_flaky():
            if not MARK.exists():
                MARK.write_text("failed once")
                raise AssertionError("first run fails")
    """,
    "test_e_broken_import.py": """
        import no_such_module_anywhere

        def test_never_runs():
            pass
    """,
}
HANG_MESSAGES = {"timed out after 2 s", "timed out after 2 s (killed by ootci)"}


def _records(result: TestRunOutcome) -> dict[str, tuple[str, str | None]]:
    return {
        r.nodeid: (r.outcome, "<hang>" if r.message in HANG_MESSAGES else r.message)
        for r in result.results
    }


def _started(events_file: Path) -> set[str]:
    lines = events_file.read_text().splitlines()
    return {json.loads(line)["nodeid"] for line in lines if '"started"' in line}


@pytest.mark.slow
def test_parallel_records_what_serial_records(installed: object, tmp_path: Path) -> None:
    serial_root, parallel_root = tmp_path / "serial", tmp_path / "parallel"
    serial_suite = make_suite(serial_root, SUITE, timeout_per_test=2)
    parallel_suite = make_suite(parallel_root, SUITE, timeout_per_test=2)

    policy = ChildEnvPolicy(tmp_path / "policy-home", tmp_path / "policy-tmp")
    with child_environment(policy):
        serial = run(serial_suite, installed, serial_root)  # type: ignore[arg-type]
        parallel = run(parallel_suite, installed, parallel_root, processes=2)  # type: ignore[arg-type]

    assert _records(parallel) == _records(serial)
    assert _records(serial) == {
        "tests/test_a_plain.py::test_passes": ("passed", None),
        "tests/test_a_plain.py::test_fails": ("failed", "AssertionError: always\nassert 1 == 2"),
        "tests/test_a_plain.py::test_skipped": ("skipped", "Skipped: not on this device"),
        "tests/test_b_aborts.py::test_before_abort": ("passed", None),
        "tests/test_b_aborts.py::test_aborts": (
            "crashed", "Aborted (SIGABRT) in tests/test_b_aborts.py:test_aborts"),
        "tests/test_b_aborts.py::test_after_abort": ("passed", None),
        "tests/test_c_hangs.py::test_before_hang": ("passed", None),
        "tests/test_c_hangs.py::test_hangs": ("crashed", "<hang>"),
        "tests/test_c_hangs.py::test_after_hang": ("passed", None),
        "tests/test_d_flaky.py::test_flaky": (
            "flaky", "passed on rerun; first run: AssertionError: first run fails"
        ),
        "tests/test_e_broken_import.py": (
            "error", "ModuleNotFoundError: No module named 'no_such_module_anywhere'"
        ),
    }
    assert (parallel.step.status, parallel.step.summary) == (serial.step.status, serial.step.summary)
    # The suite really ran in two processes, each file in exactly one of them.
    work = parallel_root / "work"
    parts = [_started(work / f"part-{i}" / RESULTS_FILE) for i in (0, 1)]
    assert parts[0] and parts[1] and not parts[0] & parts[1]
    assert parts[0] | parts[1] == _started(serial_root / "work" / RESULTS_FILE)
    log = (parallel_root / "test.log").read_text()
    assert "in 2 processes" in log and "[part 1] " in log


def test_files_named_on_the_command_line_run_in_one_part_each(
    installed: object, tmp_path: Path
) -> None:
    # pytest collects a file given as an argument whatever pytest_ignore_collect says.
    command = ('["{python}", "-m", "pytest", "tests/test_x.py", "tests/test_y.py", '
               '"-p", "no:cacheprovider", "--junitxml={junit}"]')
    files = {name: "def test_one():\n    pass\n\ndef test_two():\n    pass\n"
             for name in ("test_x.py", "test_y.py")}
    suite = make_suite(tmp_path, files, command=command)
    result = run(suite, installed, tmp_path, processes=2)  # type: ignore[arg-type]
    assert len(result.results) == 4 and result.step.summary == "4 passed"
    parts = [_started(tmp_path / "work" / f"part-{i}" / RESULTS_FILE) for i in (0, 1)]
    assert len(parts[0]) == len(parts[1]) == 2 and not parts[0] & parts[1]


def test_the_pipeline_runs_the_parts_in_its_sandbox(world_readable_dir: Path) -> None:
    # Through execute_run with the default sandbox: under root the parts' pytest processes
    # run as the sandbox uid, which must be able to write into each part's dir.
    files = {f"test_{n}.py": f"def test_{n}():\n    pass\n" for n in range(3)}
    backend = write_pyonly_backend(world_readable_dir / "pyonly", files)
    settings = Settings(home=world_readable_dir / "home", database_url="", broker_url="",
                        test_processes=2, rerun_failed_tests=False)
    engine = make_engine(settings.resolved_database_url)
    upgrade(engine)
    with session_scope(engine) as s:
        run_id = create_run(s, get_or_create_backend(s, "pyonly", str(backend)), "installed",
                            trigger="cli").id
    state = execute_run(engine, settings, run_id, "w1")
    with Session(engine) as s:
        results = {r.nodeid: r.outcome
                   for r in s.scalars(select(TestResult).where(TestResult.run_id == run_id))}
        test_log = next(st for st in s.get_one(Run, run_id).steps if st.name == "test")
        log_text = test_log.read_log().decode()
    engine.dispose()
    assert state == "passed", log_text[-3000:]
    assert results == {f"tests/test_{n}.py::test_{n}": "passed" for n in range(3)}
    assert "in 2 processes" in log_text


def test_the_next_run_balances_its_parts_by_the_last_runs_times(world_readable_dir: Path) -> None:
    # By size the smallest file, the slow one, would share a part; by the first run's times
    # it gets a part to itself.
    files = {
        "test_0.py": "import time\n\ndef test_0():\n    time.sleep(1)\n",
        "test_1.py": "def test_1():\n    pass\n" + "# padding\n" * 30,
        "test_2.py": "def test_2():\n    pass\n" + "# padding\n" * 20,
    }
    backend = write_pyonly_backend(world_readable_dir / "pyonly", files)
    settings = Settings(home=world_readable_dir / "home", database_url="", broker_url="",
                        test_processes=2, rerun_failed_tests=False, test_serial_below_s=0)
    engine = make_engine(settings.resolved_database_url)
    upgrade(engine)
    parts: list[list[set[str]]] = []
    for _ in range(2):
        with session_scope(engine) as s:
            run_id = create_run(s, get_or_create_backend(s, "pyonly", str(backend)), "installed",
                                trigger="cli").id
        assert execute_run(engine, settings, run_id, "w1") == "passed"
        test_dir = settings.home / "work" / "runs" / str(run_id) / "test"
        parts.append([_started(test_dir / f"part-{i}" / RESULTS_FILE) for i in (0, 1)])
        log_text = (test_dir.parent / "test.log").read_text()
    engine.dispose()
    slow = "tests/test_0.py::test_0"
    assert slow in parts[0][1] and len(parts[0][1]) == 2  # by size
    assert parts[1][0] == {slow}  # by time
    assert "parts balanced by the backend's previous run: 3 of 3 file(s) timed" in log_text


def test_a_suite_the_last_run_timed_as_short_runs_in_one_process(world_readable_dir: Path) -> None:
    # The first run has no times: listed and split. The second knows the suite took well
    # under test_serial_below_s: no listing, no parts, the same records from one pytest.
    files = {f"test_{n}.py": f"def test_{n}():\n    pass\n" for n in range(3)}
    backend = write_pyonly_backend(world_readable_dir / "pyonly", files)
    settings = Settings(home=world_readable_dir / "home", database_url="", broker_url="",
                        test_processes=2, rerun_failed_tests=False, test_serial_below_s=60)
    engine = make_engine(settings.resolved_database_url)
    upgrade(engine)
    runs: list[tuple[dict[str, str], Path, str]] = []
    for _ in range(2):
        with session_scope(engine) as s:
            run_id = create_run(s, get_or_create_backend(s, "pyonly", str(backend)), "installed",
                                trigger="cli").id
        assert execute_run(engine, settings, run_id, "w1") == "passed"
        with Session(engine) as s:
            results = {r.nodeid: r.outcome
                       for r in s.scalars(select(TestResult).where(TestResult.run_id == run_id))}
        test_dir = settings.home / "work" / "runs" / str(run_id) / "test"
        runs.append((results, test_dir, (test_dir.parent / "test.log").read_text()))
    engine.dispose()
    (first, first_dir, first_log), (second, second_dir, second_log) = runs
    assert first == second == {f"tests/test_{n}.py::test_{n}": "passed" for n in range(3)}
    assert "in 2 processes" in first_log and (first_dir / "part-1").is_dir()
    assert "one pytest process: the suite's tests took" in second_log
    assert "listing the suite's test files" not in second_log
    assert not (second_dir / "listing").exists() and not (second_dir / "part-0").exists()
