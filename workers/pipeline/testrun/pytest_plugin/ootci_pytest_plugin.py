"""Loaded into the backend's pytest by ootci's test step (``-p ootci_pytest_plugin``).

It appends one JSON line per event to $OOTCI_RESULTS as things happen:
``started`` before a test's setup, ``finished`` after its teardown (with the combined
outcome), ``finished`` with outcome ``error`` for a module that fails to import, and
``session_finished`` at the end. Each line is one ``write`` on an O_APPEND descriptor, so a
test that kills the interpreter leaves every earlier line intact and its own ``started``
line unanswered: that is how the runner tells which test crashed. A ``collected`` line
lists the node ids the process is about to run (after deselection).

$OOTCI_DESELECT / $OOTCI_SELECT name files of node ids (one a line) to leave out / to keep
only: the runner restarts pytest after a crash without the tests already recorded, and
reruns failures alone. $OOTCI_ATTEMPT tags every line with the run it came from.

For a parallel test step (``parallel.py``): with $OOTCI_LIST_FILES the plugin only
lists the files pytest would collect (one ``test_file`` line each) and imports none of them;
$OOTCI_IGNORE_FILES names files (absolute paths, one a line) this process must not collect:
the files the other processes of the step run.

Only the standard library and pytest's hooks: this runs inside whatever torch and pytest
the backend's environment has.
"""

from __future__ import annotations

import ast
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

MAX_TEXT = 20_000


class _Recorder:
    def __init__(self, path: str, attempt: int) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._attempt = attempt
        self._reports: dict[str, list[pytest.TestReport]] = {}

    def emit(self, event: str, **fields: Any) -> None:
        line = {"event": event, "attempt": self._attempt, "time": time.time(), **fields}
        os.write(self._fd, (json.dumps(line) + "\n").encode("utf-8"))

    def close(self) -> None:
        os.close(self._fd)

    # -- hooks ---------------------------------------------------------------------------
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self._reports[nodeid] = []
        self.emit("started", nodeid=nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._reports.setdefault(report.nodeid, []).append(report)

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        reports = self._reports.pop(nodeid, [])
        outcome, message, longrepr = _combine(reports)
        self.emit(
            "finished",
            nodeid=nodeid,
            outcome=outcome,
            duration=round(sum(r.duration for r in reports), 6),
            message=message,
            longrepr=longrepr,
        )

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            text = _text(report.longreprtext)
            hidden = _tests_defined(report.fspath)
            if hidden:
                # Every test of the file is gone from the results: say how many, or a file
                # that no longer imports looks like one failure among many passes.
                note = f"ootci: this collection error hid {hidden} test(s) of {report.nodeid}"
                text = f"{text}\n{note}" if text else note
            self.emit(
                "finished",
                nodeid=report.nodeid or ".",
                outcome="error",
                duration=None,
                message=_first_error_line(text),
                longrepr=text,
            )

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        deselect = _read_ids(os.environ.get("OOTCI_DESELECT"))
        select = _read_ids(os.environ.get("OOTCI_SELECT"))
        if not deselect and select is None:
            return
        keep: list[pytest.Item] = []
        drop: list[pytest.Item] = []
        for item in items:
            wanted = item.nodeid not in (deselect or ()) and (
                select is None or item.nodeid in select
            )
            (keep if wanted else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # After every deselection: what this process is going to run, so the runner knows
        # which tests a crash that ends the step leaves unrun.
        self.emit("collected", nodeids=[item.nodeid for item in session.items])

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.emit("session_finished", exitstatus=int(exitstatus))


def _tests_defined(path: str) -> int:
    """How many test functions a test file defines (module-level ``test*`` and ``test*``
    methods of ``Test*`` classes; a parametrized one counts once): what a collection error
    of the file hides. 0 for anything that is not a readable Python file."""
    if not path.endswith(".py"):
        return 0
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return 0
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    count = 0
    for node in tree.body:
        if isinstance(node, functions) and node.name.startswith("test"):
            count += 1
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            count += sum(
                1 for item in node.body
                if isinstance(item, functions) and item.name.startswith("test")
            )
    return count


def _read_ids(path: str | None) -> set[str] | None:
    if not path:
        return None
    with open(path, encoding="utf-8") as f:
        return {line.rstrip("\n") for line in f if line.strip()}


def _text(value: str | None) -> str | None:
    if not value:
        return None
    return value if len(value) <= MAX_TEXT else value[:MAX_TEXT] + "\n[... truncated by ootci]"


def _first_error_line(text: str | None) -> str | None:
    """The line a human reads first: pytest marks the raised exception with 'E   '."""
    if not text:
        return None
    for line in text.splitlines():
        if line.startswith("E   "):
            return line[4:].strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else None


def _message(report: pytest.TestReport) -> str | None:
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message)
    return _first_error_line(report.longreprtext)


def _combine(reports: list[pytest.TestReport]) -> tuple[str, str | None, str | None]:
    """One outcome for a test from its setup/call/teardown reports, as junit would."""
    by_phase = {r.when: r for r in reports}
    setup, call, teardown = (by_phase.get(w) for w in ("setup", "call", "teardown"))
    for phase, failed_as in ((setup, "error"), (call, "failed"), (teardown, "error")):
        if phase is not None and phase.failed:
            return failed_as, _message(phase), _text(phase.longreprtext)
    for phase in (setup, call):
        if phase is not None and phase.skipped:
            return "skipped", _message(phase), None
    if call is None:
        return "error", "test produced no result", None
    return "passed", None, None


class _FileLister:
    """Records each file pytest would collect and hands pytest no collector for it: the
    listing imports the conftests but no test module (a test file that crashes on import
    crashes in the process that runs it, not here)."""

    def __init__(self, recorder: _Recorder) -> None:
        self._recorder = recorder

    @pytest.hookimpl(hookwrapper=True)
    def pytest_collect_file(self, file_path: Path, parent: Any) -> Any:
        outcome = yield
        if outcome.get_result():
            self._recorder.emit("test_file", path=str(Path(file_path).resolve()))
            # A node for the file that collects nothing: a file named on the command line
            # still matches a node (no "not found"), and no test module is imported.
            outcome.force_result([_ListedFile.from_parent(parent, path=Path(file_path))])


class _ListedFile(pytest.File):
    def collect(self) -> list[Any]:
        return []


class _FileFilter:
    """Keeps this process off the files the other processes of a parallel step run."""

    def __init__(self, ignored: set[str]) -> None:
        self._ignored = ignored

    def pytest_ignore_collect(self, collection_path: Path, config: pytest.Config) -> bool | None:
        return True if str(Path(collection_path).resolve()) in self._ignored else None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        # A file named on the command line is collected whatever pytest_ignore_collect
        # says: its tests are dropped here instead.
        drop = [i for i in items if str(Path(i.path).resolve()) in self._ignored]
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = [i for i in items if i not in drop]


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get("OOTCI_RESULTS")
    if path and not hasattr(config, "workerinput"):  # xdist workers report via the controller
        recorder = _Recorder(path, int(os.environ.get("OOTCI_ATTEMPT", "0")))
        config.pluginmanager.register(recorder, "ootci_recorder")
        config.add_cleanup(recorder.close)
        if os.environ.get("OOTCI_LIST_FILES"):
            config.pluginmanager.register(_FileLister(recorder), "ootci_file_lister")
    ignored = _read_ids(os.environ.get("OOTCI_IGNORE_FILES"))
    if ignored:
        config.pluginmanager.register(_FileFilter(ignored), "ootci_file_filter")
