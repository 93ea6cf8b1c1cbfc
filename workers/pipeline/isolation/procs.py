"""Subprocess helpers shared by the pipeline steps.

Every step runs foreign code (pip, cmake, a vendor's pytest suite) that may print for an
hour, hang, or die from a signal. :func:`run_streaming` gives all of them the same contract:
output goes to a :class:`LineLog` line by line as it comes, the whole process group is killed
on a timeout or when a watchdog says so, and the result says which of those happened.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import select
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from workers.pipeline.isolation.child_env import base_environ, current_policy

# Exit status a shell uses for "command not found"; we report a missing executable the same
# way so callers handle one failure shape, not an exception and an exit code.
EXIT_NOT_FOUND = 127
_TERM_GRACE_S = 3.0
_READER_DRAIN_S = 5.0
_PR_SET_PDEATHSIG = 1
# Loaded in the parent: the child, between fork and exec, only calls it.
_LIBC = ctypes.CDLL(None, use_errno=True)

_log = logging.getLogger(__name__)


class LineLog(Protocol):
    """Where a child's output goes, line by line: a step's ``logs.sink.LogSink``."""

    @property
    def path(self) -> Path: ...

    def write(self, line: str) -> None: ...


@dataclass(frozen=True)
class ProcResult:
    returncode: int
    duration_s: float
    # Why we killed it, e.g. "timed out after 60 s"; None when it ended by itself.
    killed_reason: str | None = None
    # Why it never ran (missing executable, not executable); returncode is then 127.
    start_error: str | None = None
    # bwrap could not set the step's sandbox up (its ``SetupWitness`` says the command
    # never started): bwrap's own last line. Never taken from what the step printed.
    setup_failure: str | None = None

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


@dataclass
class Attempt:
    """What every child of one run attempt shares (set by :func:`attempt_scope`, per thread).

    ``abort`` is polled beside each step's watchdog: a reason (the lease is lost) kills the
    child's group. Each child's process group is appended to ``groups_file`` so the next
    attempt reaps what a killed worker left (grandchildren outlive a death signal)."""

    abort: Callable[[], str | None] = lambda: None
    groups_file: Path | None = None
    started: list[int] = field(default_factory=list)


_attempts = threading.local()


@contextlib.contextmanager
def attempt_scope(attempt: Attempt) -> Iterator[Attempt]:
    previous = getattr(_attempts, "current", None)
    _attempts.current = attempt
    try:
        yield attempt
    finally:
        _attempts.current = previous


def _current_attempt() -> Attempt | None:
    current: Attempt | None = getattr(_attempts, "current", None)
    return current


def current_attempt() -> Attempt | None:
    """The calling thread's attempt: a thread a step starts re-enters it (attempt_scope) so
    its children are tracked and aborted with the step's own."""
    return _current_attempt()


def _record_group(attempt: Attempt | None, pgid: int) -> None:
    if attempt is None:
        return
    attempt.started.append(pgid)
    if attempt.groups_file is not None:
        try:
            with attempt.groups_file.open("a") as f:
                f.write(f"{pgid}\n")
        except OSError:
            _log.warning("cannot record process group %s in %s", pgid, attempt.groups_file)


def reap_groups(groups_file: Path) -> list[int]:
    """SIGKILL the process groups an earlier attempt recorded (a worker killed mid-step
    leaves its build's grandchildren running); the groups that still existed."""
    try:
        pgids = {int(line) for line in groups_file.read_text().split() if line.isdigit()}
    except OSError:
        return []
    killed = []
    for pgid in sorted(pgids):
        try:
            os.killpg(pgid, signal.SIGKILL)
            killed.append(pgid)
        except (ProcessLookupError, PermissionError):
            continue
    groups_file.unlink(missing_ok=True)
    return killed


def _die_with_parent(then: Callable[[], None] | None, parent: int) -> Callable[[], None]:
    """A preexec that has the kernel SIGKILL the child when the worker dies (kill -9
    included), then runs ``then``. bwrap (``--die-with-parent``) and setpriv
    (``--pdeathsig``) carry it past their own credential changes, which clear it."""

    def preexec() -> None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(137)
        if then is not None:
            then()

    return preexec


class SetupWitness:
    """bwrap's own account of a step's start (``--json-status-fd``): a pipe only bwrap
    writes, never the step (bwrap keeps the fd from the command it starts). bwrap reports
    ``"exit-code"`` once the command it started has ended; a bwrap that exits 1 (its
    ``die()``) without it never started the command: the set-up failed, so the machine is
    to blame. What the step prints cannot say so: it never sees this pipe."""

    def __init__(self) -> None:
        self._read, self.fd = os.pipe()

    def started_in_parent(self) -> None:
        """The child holds the write end now; the parent's copy would keep the pipe open."""
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def discard(self) -> None:
        """The command never ran to an end we can judge (it could not be started, or timed
        out): close the read end unread."""
        with contextlib.suppress(OSError):
            os.close(self._read)

    def never_started(self, returncode: int) -> bool:
        """After the process ended: did bwrap give up before the command ran?"""
        os.set_blocking(self._read, False)
        said = b""
        with contextlib.suppress(BlockingIOError, OSError):
            while chunk := os.read(self._read, 65536):
                said += chunk
        os.close(self._read)
        return returncode == 1 and b'"exit-code"' not in said


def _pump(stream: IO[bytes], log: LineLog, last: list[str] | None = None) -> None:
    """Drain the child's output to ``log``. Never raises: a log that cannot be written (a
    full disk) must not leave the child blocked on a full pipe; the sink keeps the error.
    ``last`` keeps the last non-empty line (bwrap's reason when it could not start)."""
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        if last is not None and line.strip():
            last[:] = [line.strip()]
        try:
            log.write(line)
        except Exception:
            if not getattr(log, "write_error", None):
                _log.exception("cannot write to %s; draining the output", log.path)
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


def _pidfd(proc: subprocess.Popen[bytes]) -> int | None:
    """A descriptor that turns readable when ``proc`` ends (Linux >= 5.3); None elsewhere."""
    try:
        return os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return None


def _wait_for_exit(proc: subprocess.Popen[bytes], pidfd: int | None, poll_s: float) -> None:
    """Up to ``poll_s`` for ``proc`` to end. With a pidfd its end is noticed at once; the
    fallback, ``Popen.wait(timeout)``, sleeps in steps of up to 50 ms, and a small backend's
    run starts a dozen processes: up to half a second of nobody working."""
    if pidfd is not None:
        select.select([pidfd], [], [], poll_s)
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=poll_s)


def run_streaming(
    cmd: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    log: LineLog,
    timeout_s: float,
    watchdog: Callable[[], str | None] | None = None,
    poll_s: float = 0.2,
    term_grace_s: float = _TERM_GRACE_S,
    preexec_fn: Callable[[], None] | None = None,
    pass_fds: tuple[int, ...] = (),
    witness: SetupWitness | None = None,
) -> ProcResult:
    """Run ``cmd`` in its own process group, streaming stdout+stderr to ``log``.

    ``watchdog`` is polled every ``poll_s``; a non-None answer kills the group and becomes
    ``killed_reason`` (the test step uses it for per-test deadlines). The overall timeout
    does the same with "timed out after N s". ``preexec_fn`` runs in the child before it
    execs (the sandbox sets its limits and drops privileges there); the child always dies
    with the worker. ``pass_fds`` stay open in the child (a lock the attempt holds until its
    last child is gone). ``witness``: the sandbox's status pipe (``StepSandbox.witness``,
    its fd already in ``cmd``); when bwrap says it never started the command,
    ``setup_failure`` is its reason.
    """
    attempt = _current_attempt()
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
            preexec_fn=_die_with_parent(preexec_fn, os.getpid()),
            pass_fds=(*pass_fds, *([witness.fd] if witness is not None else [])),
        )
    except OSError as exc:
        if witness is not None:
            witness.never_started(EXIT_NOT_FOUND)  # closes its pipe
        log.write(f"ootci: cannot start {cmd[0]!r}: {exc}")
        return ProcResult(EXIT_NOT_FOUND, time.monotonic() - start, start_error=str(exc))
    finally:
        if witness is not None:
            witness.started_in_parent()
    assert proc.stdout is not None
    _record_group(attempt, proc.pid)
    last: list[str] = []
    reader = threading.Thread(target=_pump, args=(proc.stdout, log, last), daemon=True)
    reader.start()

    reason: str | None = None
    deadline = start + timeout_s
    pidfd = _pidfd(proc)
    try:
        while proc.poll() is None:
            if time.monotonic() >= deadline:
                reason = f"timed out after {timeout_s:g} s"
            elif attempt is not None and (aborted := attempt.abort()) is not None:
                reason = aborted
            elif watchdog is not None:
                reason = watchdog()
            if reason is not None:
                log.write(f"ootci: killing {cmd[0]!r}: {reason}")
                _kill_group(proc, term_grace_s)
                break
            _wait_for_exit(proc, pidfd, poll_s)
    finally:
        if pidfd is not None:
            os.close(pidfd)

    reader.join(_READER_DRAIN_S)
    if reader.is_alive():
        # A daemon the command left behind keeps the pipe open; it belongs to this step.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        reader.join(_READER_DRAIN_S)
    returncode = proc.wait()
    # What the command left in its group (a daemon that let go of our pipe) ends with the
    # step: nothing of a step outlives it.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    setup_failure = None
    # Read (and closed) whatever ended the step; a step ootci killed did start.
    if witness is not None and witness.never_started(returncode) and reason is None:
        setup_failure = last[0] if last else f"bwrap exited {returncode}"
    return ProcResult(returncode, time.monotonic() - start, reason, setup_failure=setup_failure)
