"""Pure parts of the dashboard: matrix cells, "only what changed", log paging."""

from __future__ import annotations

from service.api.pages.cells import Cell, FailureFact, RunFacts, build_cell, import_cell, suite_cell
from service.api.pages.logview import page_of_line, paginate
from service.api.pages.matrix import Row, mark_changes


def facts(**kw: object) -> RunFacts:
    base: dict[str, object] = dict(run_id=7, state="passed", verdict=None, verdict_subtype=None,
                                   steps={"provision": "passed", "build": "passed",
                                          "test": "passed", "collect": "passed"},
                                   failures=[], suite_counts={}, suite_of={})
    base.update(kw)
    return RunFacts(**base)  # type: ignore[arg-type]


HEADER = FailureFact("build", "upstream", "header-moved", None, "fatal error: x.h: No such file")


def test_build_failure_is_named_by_its_category_and_subtype() -> None:
    run = facts(state="failed", steps={"provision": "passed", "build": "failed",
                                       "test": "skipped"}, failures=[HEADER])
    cell = build_cell(run)
    assert (cell.verdict, cell.subtype, cell.run_id) == ("upstream", "header-moved", 7)
    assert cell.glyph == "✗" and cell.label == "up"  # shape and text, not colour alone
    assert "header-moved" in cell.title and "No such file" in cell.title
    assert import_cell(run).verdict == "notrun"
    assert suite_cell(run, "test_ops").verdict == "notrun"


def test_the_most_actionable_category_wins_a_shared_cell() -> None:
    infra = FailureFact("build", "infra", "killed", None, "Killed signal")
    run = facts(state="failed", failures=[infra, HEADER])
    assert build_cell(run).verdict == "upstream"


def test_failed_step_without_classified_failure_uses_the_run_verdict() -> None:
    run = facts(state="errored", verdict="infra", verdict_subtype="timeout",
                steps={"provision": "errored"})
    assert (build_cell(run).verdict, build_cell(run).subtype) == ("infra", "timeout")
    unclassified = facts(state="failed", steps={"provision": "passed", "build": "failed"})
    assert build_cell(unclassified).verdict == "unknown"


def test_import_failure() -> None:
    imp = FailureFact("import", "upstream", "link-abi", None, "undefined symbol: _ZN3c10")
    run = facts(state="failed", steps={"provision": "passed", "build": "passed",
                                       "test": "failed"}, failures=[imp])
    assert build_cell(run).verdict == "pass"
    assert import_cell(run).subtype == "link-abi"


def test_suite_cells_count_outcomes_and_attach_failures_by_suite() -> None:
    regression = FailureFact("test", "upstream", "test-regression", "tests/test_amp.py::t1", "E")
    run = facts(
        state="failed",
        failures=[regression],
        suite_counts={"test_amp": {"passed": 8, "failed": 1}, "test_ops": {"passed": 9},
                      "test_random": {"passed": 8, "flaky": 1}, "test_dist": {"skipped": 3},
                      "test_memory": {"passed": 5, "crashed": 1}},
        suite_of={"tests/test_amp.py::t1": "test_amp", "tests/test_memory.py::t2": "test_memory"},
    )
    amp = suite_cell(run, "test_amp")
    assert (amp.verdict, amp.subtype) == ("upstream", "test-regression")
    assert "1 of 9 tests failed" in amp.title
    assert suite_cell(run, "test_ops").verdict == "pass"
    assert suite_cell(run, "test_random").verdict == "flake"
    assert suite_cell(run, "test_dist").verdict == "skipped"
    # A crash nobody classified is still a failure, never a pass.
    assert suite_cell(run, "test_memory").verdict == "unknown"
    assert suite_cell(run, "test_absent").verdict == "notrun"


def test_running_and_queued_runs() -> None:
    running = facts(state="running", steps={"provision": "passed", "build": "running"})
    assert build_cell(running).verdict == "running"
    assert import_cell(running).verdict == "running"
    assert suite_cell(running, "test_ops").verdict == "running"
    queued = facts(state="queued", steps={})
    assert build_cell(queued).verdict == "queued"


def _row(label: str, kind: str, verdict: str) -> Row:
    return Row(label, kind, 1, {("b", "build"): Cell(verdict, None, "", 1)}, changed=True)


def test_changes_compare_with_the_next_older_row_of_the_same_kind() -> None:
    rows = [_row("pin-new", "pin", "pass"), _row("n3", "nightly", "pass"),
            _row("pin-old", "pin", "pass"), _row("n2", "nightly", "pass"),
            _row("n1", "nightly", "upstream")]
    marked = {r.label: r.changed for r in mark_changes(rows, [("b", "build")])}
    assert marked == {"pin-new": False, "n3": False, "n2": True, "n1": True, "pin-old": True}


def test_log_pages() -> None:
    data = b"".join(b"l%d\n" % i for i in range(1, 1001))
    page = paginate(data, 2, per_page=400)
    assert (page.page, page.pages, page.first_line, page.total_lines) == (2, 3, 401, 1000)
    assert page.lines[0] == "l401" and len(page.lines) == 400
    assert paginate(data, 50, per_page=400).page == 3
    assert paginate(b"", 1).lines == [] and paginate(b"", 1).pages == 1
    assert paginate(b"ok \xff\n", 1).lines == ["ok \ufffd"]  # bad bytes shown, not dropped
    assert page_of_line(400, 400) == 1 and page_of_line(401, 400) == 2


def test_log_lines_are_numbered_as_the_classifier_counts_them() -> None:
    # A progress bar (\r), a form feed and CRLF endings: only \n ends a line.
    data = b"pip 10%\rpip 100%\nsection\x0cnext\r\nerror: boom\n"
    page = paginate(data, 1)
    assert page.lines == ["pip 10%\rpip 100%", "section\x0cnext", "error: boom"]
    assert page.lines[data.count(b"\n", 0, data.index(b"error"))] == "error: boom"
