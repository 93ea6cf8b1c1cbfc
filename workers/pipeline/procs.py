"""Subprocess helpers shared by the pipeline steps.

Every step runs foreign code (pip, cmake, a vendor's pytest suite) that may print for an
hour, hang, or die from a signal. :func:`run_streaming` gives all of them the same contract:
output goes to a :class:`LogSink` line by line as it comes, the whole process group is killed
on a timeout or when a watchdog says so, and the result says which of those happened.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from workers.pipeline.child_env import base_environ, current_policy
from workers.pipeline.logsink import LogSink

# Exit status a shell uses for "command not found"; we report a missing executable the same
# way so callers handle one failure shape, not an exception and an exit code.
EXIT_NOT_FOUND = 127
_TERM_GRACE_S = 3.0
_READER_DRAIN_S = 5.0


@dataclass(frozen=True)
class ProcResult:
    returncode: int
    duration_s: float
    # Why we killed it, e.g. "timed out after 60 s"; None when it ended by itself.
    killed_reason: str | None = None
    # Why it never ran (missing executable, not executable); returncode is then 127.
    start_error: str | None = None

    @property
    def signal_name(self) -> str | None:
        """'SIGSEGV' when the process died from a signal (directly or as a shell's 128+n)."""
        sig = signal_of(self.returncode)
        return sig.name if sig is not None else None


def signal_of(returncode: int) -> signal.Signals | None:
    number = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    try:
        return signal.Signals(number) if number > 0 else None
    except ValueError:
        return None


def describe_signal(returncode: int) -> str | None:
    """'Segmentation fault (SIGSEGV)' for a process killed by SIGSEGV, else None."""
    sig = signal_of(returncode)
    if sig is None:
        return None
    return f"{signal.strsignal(sig) or sig.name} ({sig.name})"


def child_env(
    overrides: Mapping[str, str], *, pythonpath_front: Iterable[Path | str] = ()
) -> dict[str, str]:
    """The current policy's constructed environment (never the worker's: see
    ``child_env.base_environ``) with ``overrides`` applied and ``pythonpath_front`` put
    before any PYTHONPATH the overrides have."""
    env = base_environ(current_policy())
    env.update(overrides)
    front = [str(p) for p in pythonpath_front]
    if front:
        rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in front]
        env["PYTHONPATH"] = os.pathsep.join(front + rest)
    return env


def _pump(stream: IO[bytes], log: LogSink) -> None:
    for raw in iter(stream.readline, b""):
        log.write(raw.decode("utf-8", errors="replace"))
    stream.close()


def _kill_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the process group, SIGKILL whatever is left after ``grace_s``."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            # The leader is gone; children it left in the group still hold our pipe.
            os.killpg(proc.pid, signal.SIGKILL)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def run_streaming(
    cmd: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    log: LogSink,
    timeout_s: float,
    watchdog: Callable[[], str | None] | None = None,
    poll_s: float = 0.2,
    term_grace_s: float = _TERM_GRACE_S,
    preexec_fn: Callable[[], None] | None = None,
) -> ProcResult:
    """Run ``cmd`` in its own process group, streaming stdout+stderr to ``log``.

    ``watchdog`` is polled every ``poll_s``; a non-None answer kills the group and becomes
    ``killed_reason`` (the test step uses it for per-test deadlines). The overall timeout
    does the same with "timed out after N s". ``preexec_fn`` runs in the child before it
    execs (the sandbox sets its limits and drops privileges there).
    """
    log.write(f"$ {shlex.join(cmd)}")
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=preexec_fn,
        )
    except OSError as exc:
        log.write(f"ootci: cannot start {cmd[0]!r}: {exc}")
        return ProcResult(EXIT_NOT_FOUND, time.monotonic() - start, start_error=str(exc))
    assert proc.stdout is not None
    reader = threading.Thread(target=_pump, args=(proc.stdout, log), daemon=True)
    reader.start()

    reason: str | None = None
    deadline = start + timeout_s
    while proc.poll() is None:
        if time.monotonic() >= deadline:
            reason = f"timed out after {timeout_s:g} s"
        elif watchdog is not None:
            reason = watchdog()
        if reason is not None:
            log.write(f"ootci: killing {cmd[0]!r}: {reason}")
            _kill_group(proc, term_grace_s)
            break
        time.sleep(poll_s)

    reader.join(_READER_DRAIN_S)
    if reader.is_alive():
        # A daemon the command left behind keeps the pipe open; it belongs to this step.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        reader.join(_READER_DRAIN_S)
    returncode = proc.wait()
    return ProcResult(returncode, time.monotonic() - start, reason)
