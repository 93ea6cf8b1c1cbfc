"""Collection once per step: a restart after a crash and the rerun of failures collect only
the files that still hold a test to run, and record exactly what a step that collects the
whole suite every time records. Real pytest processes; each test module counts its imports
(that is what collecting it costs)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.support.suites import make_suite, run
from workers.pipeline.env.torch_env import TorchEnv

pytest_plugins = ["tests.support.installed_fixtures"]

_COUNT = """
    from pathlib import Path
    with Path(__file__).with_name("imports.log").open("a") as f:
        f.write(Path(__file__).stem + "\\n")
"""
SUITE = {
    "test_a_ok.py": _COUNT + """
    def test_one():
        pass

    def test_two():
        pass
    """,
    "test_b_crash.py": _COUNT + """
    import os

    def test_before():
        pass

    def test_aborts():
        os.abort()

    def test_after():
        pass
    """,
    "test_c_fails.py": _COUNT + """
    def test_fails():
        assert 1 == 2, "always"
    """,
    "test_d_broken.py": _COUNT + """
    import no_such_module_anywhere
    """,
}
RECORDED = {
    "tests/test_a_ok.py::test_one": "passed",
    "tests/test_a_ok.py::test_two": "passed",
    "tests/test_b_crash.py::test_before": "passed",
    "tests/test_b_crash.py::test_aborts": "crashed",
    "tests/test_b_crash.py::test_after": "passed",
    "tests/test_c_fails.py::test_fails": "failed",
    "tests/test_d_broken.py": "error",
}


def _step(tmp_path: Path, env: TorchEnv, *, collect_once: bool,
          processes: int = 1) -> tuple[dict[str, str], Counter[str]]:
    suite = make_suite(tmp_path, SUITE)
    outcome = run(suite, env, tmp_path, collect_once=collect_once, processes=processes)
    imports = Counter((suite / "tests" / "imports.log").read_text().split())
    return {r.nodeid: str(r.outcome) for r in outcome.results}, imports


def test_restarts_and_reruns_collect_only_what_is_left_and_record_the_same(
    tmp_path: Path, installed: TorchEnv
) -> None:
    every_time, before = _step(tmp_path / "before", installed, collect_once=False)
    once, after = _step(tmp_path / "after", installed, collect_once=True)
    assert every_time == once == RECORDED
    # Three processes (the first, the restart after the abort, the rerun of the failure):
    # each collected the whole suite before.
    assert before == Counter(test_a_ok=3, test_b_crash=3, test_c_fails=3, test_d_broken=3)
    # The restart leaves out the finished file and the one that did not import; the rerun
    # collects only the failure's file.
    assert after == Counter(test_a_ok=1, test_b_crash=2, test_c_fails=3, test_d_broken=1)


@pytest.mark.parametrize("processes", [2])
def test_the_parts_of_a_parallel_step_leave_out_their_finished_files_too(
    tmp_path: Path, installed: TorchEnv, processes: int
) -> None:
    recorded, imports = _step(tmp_path, installed, collect_once=True, processes=processes)
    assert recorded == RECORDED
    # Each file belongs to one part; a finished one is never collected again by it.
    assert imports["test_a_ok"] == 1 and imports["test_d_broken"] == 1
    assert imports["test_b_crash"] == 2
