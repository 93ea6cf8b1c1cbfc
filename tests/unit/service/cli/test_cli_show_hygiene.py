"""`ootci show` prints a build's log as text: its escape codes never reach the terminal
(issue #14 item 8), and --log-lines is validated (item 6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.cli.terminal import printable
from service.commands.runs import create_run, get_or_create_backend
from service.db import make_engine, session_scope
from service.migrate import upgrade
from service.models import Failure, RunState, Step, StepStatus
from tests.support.cli import ootci_at

HOSTILE_LOG = (
    b"compiling\n"
    b"\x1b]0;pwned-title\x07\x1b[2J\x1b[1A\x1b[31mred\x1b[0m\n"
    b"evil\rmask\n"
    b"\xc2\x9b31m c1 csi\n"
    b"last line\n"
)


def _hostile_run(home: Path) -> int:
    engine = make_engine(f"sqlite:///{home / 'ootci.db'}")
    upgrade(engine)
    with session_scope(engine) as s:
        run = create_run(s, get_or_create_backend(s, "acme", "/srv/acme"), "installed",
                         trigger="cli")
        s.flush()
        run.state = RunState.FAILED
        step = Step(run_id=run.id, name="build", status=StepStatus.FAILED,
                    summary="\x1b]0;summary-title\x07failed")
        step.store_log(HOSTILE_LOG)
        s.add(step)
        s.add(Failure(run_id=run.id, step_name="build", stage="build", nodeid=None,
                      line="error: \x1b[2Kwiped", line_no=2, captures={}, category="backend",
                      subtype="compile", rule="r", finding={}))
        run_id = run.id
    engine.dispose()
    return run_id


def test_show_strips_control_characters_from_logs_and_failures(tmp_path: Path) -> None:
    proc = ootci_at(tmp_path, "show", str(_hostile_run(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout and "\r" not in proc.stdout
    assert "\x9b" not in proc.stdout
    assert "\\x1b]0;pwned-title" in proc.stdout  # visible, not obeyed
    assert "\\x9b31m c1 csi" in proc.stdout and "last line" in proc.stdout
    assert "error: \\x1b[2Kwiped" in proc.stdout and "\\x1b]0;summary-title" in proc.stdout


@pytest.mark.parametrize("value", ["-5", "1000000", "many"])
def test_show_refuses_a_bad_log_lines_with_usage_exit(tmp_path: Path, value: str) -> None:
    proc = ootci_at(tmp_path, "show", str(_hostile_run(tmp_path)), "--log-lines", value)
    assert proc.returncode == 2
    assert "--log-lines" in proc.stderr


def test_show_with_zero_log_lines_prints_no_log(tmp_path: Path) -> None:
    proc = ootci_at(tmp_path, "show", str(_hostile_run(tmp_path)), "--log-lines", "0")
    assert proc.returncode == 0, proc.stderr
    assert "last line" not in proc.stdout


def test_printable_keeps_newlines_tabs_and_unicode() -> None:
    assert printable("a\tb\nc ✓ é") == "a\tb\nc ✓ é"
    assert printable("\x00\x1b\x7f\x85") == "\\x00\\x1b\\x7f\\x85"
