"""How the parallel test step splits a suite and merges what its parts recorded."""

from __future__ import annotations

from pathlib import Path

from service.domain.states import Outcome
from workers.pipeline.isolation.procs import ProcResult
from workers.pipeline.testrun.parallel import PartResult, merge, partition
from workers.pipeline.testrun.records import TestRecord


def _file(root: Path, name: str, size: int) -> str:
    path = root / name
    path.write_text("x" * size)
    return str(path)


def test_partition_balances_by_size_and_keeps_the_listing_order(tmp_path: Path) -> None:
    a, b, c, d = (_file(tmp_path, n, s) for n, s in
                  (("a.py", 900), ("b.py", 100), ("c.py", 500), ("d.py", 400)))
    assert partition([a, b, c, d], 2) == [[a, b], [c, d]]  # 1000 and 900 bytes
    assert partition([a, b], 8) == [[a], [b]]  # never an empty part
    assert partition([a, b, c, d], 1) == [[a, b, c, d]]


def test_partition_balances_by_last_times_and_weighs_untimed_files_by_size(
    tmp_path: Path,
) -> None:
    a, b, c, d = (_file(tmp_path, n, s) for n, s in
                  (("a.py", 900), ("b.py", 100), ("c.py", 500), ("d.py", 400)))
    # The smallest file was the slowest last time: it gets a process to itself.
    assert partition([a, b, c, d], 2, {a: 5.0, b: 40.0, c: 10.0, d: 8.0}) == [[b], [a, c, d]]
    # d has no time: its 400 bytes cost what bytes cost in a, b and c (53 s / 1500 bytes,
    # about 14 s), so a + c + d (29 s) still fit beside b (38 s).
    assert partition([a, b, c, d], 2, {a: 5.0, b: 38.0, c: 10.0}) == [[b], [a, c, d]]
    # With only b and c timed (1 s each), a (the most bytes) weighs the most: a alone.
    assert partition([a, b, c, d], 2, {b: 1.0, c: 1.0}) == [[a], [b, c, d]]
    assert partition([a, b, c, d], 2, {a: 30.0, b: 1.0, c: 1.0}) == [[a], [b, c, d]]


def _part(*records: tuple[str, Outcome], problem: str | None = None) -> PartResult:
    return PartResult(
        {n: TestRecord(nodeid=n, outcome=o) for n, o in records},
        ProcResult(returncode=1, duration_s=0.0),
        problem,
    )


def test_merge_orders_by_listed_file_and_keeps_one_session_exit() -> None:
    files = ["/src/tests/test_a.py", "/src/tests/test_b.py"]
    merged = merge(
        [
            _part(("tests/test_b.py::t1", Outcome.PASSED), ("<session exit>", Outcome.CRASHED)),
            _part(("tests/test_a.py::t2", Outcome.CRASHED), ("tests/test_a.py::t1", Outcome.PASSED),
                  ("<session exit>", Outcome.CRASHED), problem="timed out after 60 s"),
        ],
        files,
    )
    assert list(merged.records) == [
        "tests/test_a.py::t2", "tests/test_a.py::t1", "tests/test_b.py::t1", "<session exit>",
    ]
    assert merged.problem == "timed out after 60 s"
