"""Corpus scoring and golden-log handling (no builds): the confusion matrix and accuracy,
log excerpts that keep the decisive line, the golden header round trip."""

from __future__ import annotations

from pathlib import Path

from evals.classifier import golden
from evals.classifier.report import MISSING, CaseResult, Got, accuracy, confusion, summary
from evals.mutants import catalogue
from service.domain.classify import classify_log
from service.domain.verdict import Stage

BUILD_ERROR = (
    "/w/backend/csrc/runtime/OpenRegDeviceAllocator.h:24:16: error: "
    "‘c10::DataPtr openreg::OpenRegDeviceAllocator::allocate(size_t)’ marked ‘override’, "
    "but does not override"
)


def _got(subtype: str, **captures: str) -> Got:
    return Got("build", "upstream", subtype, "r", "line", 1, captures)


def test_accuracy_needs_verdict_and_captures() -> None:
    alloc = catalogue.get("allocate-const")
    moved = catalogue.get("host-allocator-header-moved")
    results = [
        CaseResult(alloc, _got("signature-changed", symbol="allocate")),
        CaseResult(moved, _got("header-moved", header="ATen/core/Other.h")),  # wrong header
        CaseResult(catalogue.get("cxx23-required"), None, error="no golden log"),
    ]
    assert [r.correct for r in results] == [True, False, False]
    assert results[1].verdict_ok and results[1].capture_problems == [
        "header='ATen/core/Other.h' does not match /^ATen/core/CachingHostAllocator\\.h$/"]
    assert accuracy(results) == 1 / 3
    matrix = confusion(results)
    assert matrix["signature-changed"]["signature-changed"] == 1
    assert matrix["language-standard"][MISSING] == 1
    data = summary(results, 1.0, "golden logs")
    assert data["correct"] == 1 and data["results"][2]["error"] == "no golden log"


def test_wrong_subtype_is_wrong_even_with_right_captures() -> None:
    r = CaseResult(catalogue.get("allocate-const"), _got("symbol-removed", symbol="allocate"))
    assert not r.verdict_ok and not r.capture_problems and not r.correct


def test_excerpt_keeps_head_decisive_line_and_marks_gaps() -> None:
    lines = [f"[{i}/900] Building CXX object csrc/x{i}.cpp.o" for i in range(900)]
    lines[0] = "ootci: building torch_openreg against torch 2.13.0+cpu"
    lines[700] = BUILD_ERROR
    text = "\n".join(lines) + "\n"
    body = golden.excerpt_log(text, 701)
    assert body.startswith("ootci: building torch_openreg")
    assert BUILD_ERROR in body and "[ootci: 652 lines omitted]" in body
    assert len(body) < len(text) / 5
    finding = classify_log(body, Stage.BUILD)
    assert finding is not None and finding.captures["symbol"] == "allocate"


def test_cap_bounds_size_and_keeps_both_ends() -> None:
    text = "first line\n" + ("x" * 100 + "\n") * 5000 + "last line\n"
    capped = golden.cap(text)
    assert len(capped.encode()) <= golden.MAX_BYTES
    assert capped.startswith("first line") and capped.rstrip().endswith("last line")


def test_golden_round_trip_and_test_records(tmp_path: Path) -> None:
    mutant = catalogue.get("is-backend-property-regression")
    body = ("assert False\n +  where False = tensor([1.], device='openreg:0').is_openreg\n"
            "tests/test_device.py:57: AssertionError\n")
    finding = golden.GoldenLog(tmp_path / "x.log", {"stage": "test"}, body=body,
                               test={"nodeid": "tests/test_device.py::test_x",
                                     "outcome": "failed"}).classify()
    assert finding is not None and finding.subtype.value == "test-regression"
    made = golden.make_golden(golden.golden_path(tmp_path, mutant), mutant, finding, body,
                              test={"nodeid": "tests/test_device.py::test_x",
                                    "outcome": "failed"}, made_by="unit test")
    made.path.write_text(made.render(), encoding="utf-8")
    loaded = golden.load(made.path)
    assert loaded.expect == {"stage": "test", "category": "upstream",
                             "subtype": "test-regression", "rule": finding.rule}
    assert loaded.test == {"nodeid": "tests/test_device.py::test_x", "outcome": "failed"}
    assert loaded.captures == {"test": "tests/test_device.py::test_x"}
    assert loaded.body == body
    assert any("imitates:" in n for n in loaded.notes)
