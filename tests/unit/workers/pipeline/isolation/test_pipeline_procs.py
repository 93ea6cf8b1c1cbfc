"""The streaming runner and the log sink: real subprocesses, real signals."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from workers.pipeline.isolation.procs import (
    EXIT_NOT_FOUND,
    child_env,
    describe_signal,
    run_streaming,
)
from workers.pipeline.logs.sink import LogSink

PY = sys.executable


def test_lines_reach_the_log_while_the_process_still_runs(tmp_path: Path) -> None:
    seen: list[tuple[float, str]] = []
    script = "import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second', flush=True)"
    with LogSink(
        tmp_path / "log", on_line=lambda line: seen.append((time.monotonic(), line))
    ) as log:
        start = time.monotonic()
        result = run_streaming(
            [PY, "-c", script], cwd=tmp_path, env=child_env({}), log=log, timeout_s=30
        )
    assert result.returncode == 0 and result.killed_reason is None
    stamps = {line: t - start for t, line in seen}
    # 'first' was delivered well before the process printed 'second' and exited.
    assert stamps["second"] - stamps["first"] > 1.0
    assert (tmp_path / "log").read_text().splitlines()[-2:] == ["first", "second"]


def test_timeout_kills_the_group_and_keeps_what_was_printed(tmp_path: Path) -> None:
    # The child spawns a grandchild that would hold the pipe open forever.
    script = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
        "print('before the hang', flush=True)\n"
        "time.sleep(300)\n"
    )
    with LogSink(tmp_path / "log") as log:
        start = time.monotonic()
        result = run_streaming(
            [PY, "-c", script], cwd=tmp_path, env=child_env({}), log=log, timeout_s=2
        )
    assert time.monotonic() - start < 20
    assert result.killed_reason == "timed out after 2 s"
    assert "before the hang" in (tmp_path / "log").read_text()


def test_watchdog_reason_is_reported(tmp_path: Path) -> None:
    calls = []

    def watchdog() -> str | None:
        calls.append(1)
        return "enough" if len(calls) > 3 else None

    with LogSink(tmp_path / "log") as log:
        result = run_streaming(
            [PY, "-c", "import time; time.sleep(60)"],
            cwd=tmp_path,
            env=child_env({}),
            log=log,
            timeout_s=60,
            watchdog=watchdog,
            poll_s=0.05,
        )
    assert result.killed_reason == "enough"
    assert "killing" in log.tail(1)[0]


def test_signal_death_is_named(tmp_path: Path) -> None:
    with LogSink(tmp_path / "log") as log:
        result = run_streaming(
            [PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"],
            cwd=tmp_path,
            env=child_env({}),
            log=log,
            timeout_s=30,
        )
    assert result.returncode == -11
    assert result.signal_name == "SIGSEGV"
    assert describe_signal(result.returncode) == "Segmentation fault (SIGSEGV)"
    assert describe_signal(134) == "Aborted (SIGABRT)"  # a shell's 128+n
    assert describe_signal(1) is None


def test_missing_executable_is_an_exit_code_not_an_exception(tmp_path: Path) -> None:
    with LogSink(tmp_path / "log") as log:
        result = run_streaming(
            ["/nonexistent/cc"], cwd=tmp_path, env=child_env({}), log=log, timeout_s=5
        )
    assert result.returncode == EXIT_NOT_FOUND
    assert result.start_error and "No such file" in result.start_error
    assert "cannot start" in log.tail(1)[0]


def test_child_env_puts_pythonpath_first(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # The worker's own PYTHONPATH is not the child's business; the overrides' is kept.
    monkeypatch.setenv("PYTHONPATH", "/worker")
    env = child_env(
        {"A": "1", "PYTHONPATH": "/old:/shared"}, pythonpath_front=[Path("/overlay"), "/shared"]
    )
    assert env["PYTHONPATH"] == "/overlay:/shared:/old"
    assert env["A"] == "1"


def test_logsink_tail_is_bounded_and_appends(tmp_path: Path) -> None:
    path = tmp_path / "step.log"
    path.write_text("from an earlier attempt\n")
    with LogSink(path, tail_lines=3) as log:
        for i in range(5):
            log.write(f"line {i}\n")
        log.write("two\nlines")
        assert log.tail(10) == ["line 4", "two", "lines"]
        assert log.tail(1) == ["lines"]
        assert log.lines_written == 7
    assert path.read_text().splitlines()[0] == "from an earlier attempt"
    assert log.closed


def test_an_ended_process_is_noticed_before_the_next_poll(tmp_path: Path) -> None:
    # The watchdog is still asked every poll_s, but the end of the process does not wait
    # for the next one.
    with LogSink(tmp_path / "log") as log:
        result = run_streaming(["sleep", "1"], cwd=tmp_path, env=child_env({}), log=log,
                               timeout_s=120, poll_s=60, watchdog=lambda: None)
    assert result.returncode == 0 and result.duration_s < 30
