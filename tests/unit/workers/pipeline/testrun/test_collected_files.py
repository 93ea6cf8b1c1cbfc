"""Which files a restart or a rerun leaves out: those with nothing left to run, and never a
file or a package dir that still holds a test to run."""

from __future__ import annotations

from workers.pipeline.testrun.collected import file_of, files_to_skip


def test_a_file_with_a_test_still_to_run_is_collected_again() -> None:
    known = ["tests/test_a.py::test_one", "tests/test_b.py::test_x", "tests/test_b.py::test_y"]
    assert files_to_skip(known, wanted=["tests/test_b.py::test_y"]) == ["tests/test_a.py"]


def test_a_file_that_did_not_import_is_left_out() -> None:
    known = ["tests/test_broken.py", "tests/test_b.py::test_x"]
    assert files_to_skip(known, wanted=["tests/test_b.py::test_x"]) == ["tests/test_broken.py"]


def test_a_package_whose_collection_failed_is_kept_when_a_test_under_it_is_left() -> None:
    known = ["tests/pkg", "tests/pkg/test_c.py::test_z"]
    assert files_to_skip(known, wanted=["tests/pkg/test_c.py::test_z"]) == []


def test_ootci_records_and_the_root_name_no_file() -> None:
    assert [file_of(n) for n in ["<collection>", "<session exit>", "<import torch>", "."]] == [
        None, None, None, None]
    assert file_of("tests/test_a.py::TestK::test_p[a::b]") == "tests/test_a.py"
    assert files_to_skip(["<collection>", "."], wanted=[]) == []
