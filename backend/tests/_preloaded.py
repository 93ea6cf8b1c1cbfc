"""The client of the preloaded interpreter (``_preloaded_server.py``): `python -c` runs
for the suite's crash, fork and subprocess tests without paying `import torch` each time.

One server per pytest process (and one per preload script, ``run_preloaded``), started at
the first run and shut down at exit (waited
for, so its CPU and its children's is in pytest's rusage like a subprocess's). A run
returns what ``subprocess.run([sys.executable, "-c", code], capture_output=True,
text=True, ...)`` returns, and raises ``subprocess.TimeoutExpired`` the same way, after
killing the run's whole process group.
"""

from __future__ import annotations

import atexit
import io
import os
import selectors
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _preloaded_server import recv, send

SERVER = Path(__file__).with_name("_preloaded_server.py")

# Variables a fresh interpreter reads while starting or while `import torch` runs: a fork
# of the server would inherit what they were when the server started, so a run that sets
# them differently gets a fresh interpreter. Read before or during import:
#   PYTHON*          the interpreter's start (PYTHONPATH, PYTHONHASHSEED, PYTHONUNBUFFERED,
#                    PYTHONFAULTHANDLER, PYTHONWARNINGS, PYTHONUSERBASE, ...)
#   LD_*             the dynamic loader, at exec (LD_PRELOAD, LD_LIBRARY_PATH)
#   TORCH*, PYTORCH_ torch's import and config (TORCH_DEVICE_BACKEND_AUTOLOAD, TORCH_LOGS,
#                    TORCHINDUCTOR_*, TORCHDYNAMO_*, PYTORCH_* allocator settings)
#   OPENREG_         torch_openreg: OPENREG_NATIVE_KERNELS is read in the library's static
#                    initialisers (except the FIRST_USE_NAMES below)
#   SHMREG_          the shmreg runtime's other variables, should it grow any
#   OMP_, KMP_, GOMP_, MKL_, OPENBLAS_  the math and threading libraries, when loaded
#   LANG, LC_*       stdio's encoding, set at start
#   HOME             the user site directory on sys.path
# Anything else (PATH, TMPDIR, PYTEST_CURRENT_TEST, a test's own variables) is applied in
# the child before the code runs, as the fresh interpreter would see it. So are these,
# though under the prefixes above: the runtimes read them at their first query (the device
# count, the first device use), never while torch imports, and the server never queries
# a device (test_preloaded.py checks that a fork with OPENREG_DEVICE_COUNT=3 counts 3):
#   OPENREG_DEVICE_COUNT, OPENREG_DEVICE_MEMORY  the openreg runtime's config(); the
#                    device allocator is sized at its first use, not when it registers
#   SHMREG_DEVICE_COUNT, SHMREG_DEVICE_MEMORY, SHMREG_SERVER  the shmreg client's config()
#                    and its server's start, at the first query likewise
IMPORT_TIME_PREFIXES = ("PYTHON", "LD_", "TORCH", "PYTORCH_", "OPENREG_", "SHMREG_", "OMP_",
                        "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "LC_")
IMPORT_TIME_NAMES = ("LANG", "HOME")
FIRST_USE_NAMES = ("OPENREG_DEVICE_COUNT", "OPENREG_DEVICE_MEMORY", "SHMREG_DEVICE_COUNT",
                   "SHMREG_DEVICE_MEMORY", "SHMREG_SERVER")

START_TIMEOUT_S = 300.0
# After a kill: how long the killed group may take to let go of the output pipes.
_KILL_GRACE_S = 10.0


def _import_time(name: str) -> bool:
    if name in FIRST_USE_NAMES:
        return False
    return name.startswith(IMPORT_TIME_PREFIXES) or name in IMPORT_TIME_NAMES


def import_time_differences(env: dict[str, str], base: dict[str, str]) -> list[str]:
    """The import-time variables ``env`` sets otherwise than ``base`` (sorted)."""
    names = {n for n in (*env, *base) if _import_time(n)}
    return sorted(n for n in names if env.get(n) != base.get(n))


class ServerDied(RuntimeError):
    pass


class Server:
    """One running server process and its socket."""

    def __init__(self, env: dict[str, str], preload: str | None = None) -> None:
        """``preload``: a script the server runs instead of `import torch` (see
        ``_preloaded_server.py``)."""
        self.env = dict(env)
        self.preload = preload
        self._conn, theirs = socket.socketpair()
        # The server's stderr: why it failed, if it does (closed with this object).
        self._log = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                [sys.executable, str(SERVER), str(theirs.fileno()),
                 *([preload] if preload is not None else [])],
                pass_fds=(theirs.fileno(),), env=self.env, cwd=tempfile.gettempdir(),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log)
        finally:
            theirs.close()
        self._conn.settimeout(START_TIMEOUT_S)
        try:
            ready, _ = recv(self._conn)
        except OSError:
            ready = None
        except BaseException:  # interrupted: no half-started server left behind
            self.close()
            raise
        self._conn.settimeout(None)
        if ready is None or "ready" not in ready:
            self.close()
            raise ServerDied(f"the preloaded server did not start:\n{self.stderr()}")
        self.started: dict = ready["ready"]

    def stderr(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def status(self) -> dict:
        send(self._conn, {"kind": "status"})
        reply, _ = recv(self._conn)
        if reply is None:
            raise ServerDied("the preloaded server went away")
        return reply

    def run(self, code: str, *, env: dict[str, str], cwd: str, timeout: float | None
            ) -> subprocess.CompletedProcess[str]:
        args = [sys.executable, "-c", code]
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            send(self._conn, {"kind": "run", "code": code, "env": env, "cwd": cwd},
                 [out_w, err_w])
        finally:
            os.close(out_w)
            os.close(err_w)
        try:
            out, err, status, killed = self._collect(out_r, err_r, timeout)
        except BaseException:
            # Whatever interrupted us (a ServerDied, a test timeout's signal, ^C): the
            # server may still be running this request and would answer it late, as if
            # for the next; closing ends it and its run, and the next run starts anew.
            self.close()
            raise
        if killed:
            raise subprocess.TimeoutExpired(args, timeout, output=_text(out), stderr=_text(err))
        return subprocess.CompletedProcess(args, os.waitstatus_to_exitcode(status),
                                           _text(out), _text(err))

    def _collect(self, out_r: int, err_r: int, timeout: float | None
                 ) -> tuple[bytes, bytes, int, bool]:
        """Read both pipes to EOF and the child's exit; kill its group at the deadline."""
        chunks = {out_r: bytearray(), err_r: bytearray()}
        sel = selectors.DefaultSelector()
        for fd in chunks:
            sel.register(fd, selectors.EVENT_READ)
        sel.register(self._conn, selectors.EVENT_READ)
        deadline = None if timeout is None else time.monotonic() + timeout
        status: int | None = None
        killed = False
        try:
            while status is None or len(sel.get_map()) > 1:
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    if killed:  # the group is dead; something else holds the pipes
                        break
                    killed = True
                    send(self._conn, {"kind": "kill"})
                    deadline = time.monotonic() + _KILL_GRACE_S
                    continue
                for key, _ in sel.select(wait):
                    if key.fileobj is self._conn:
                        reply, _ = recv(self._conn)
                        if reply is None:
                            raise ServerDied(f"the preloaded server died during a run:\n"
                                             f"{self.stderr()}")
                        if "exited" in reply:
                            status = reply["exited"]
                            sel.unregister(self._conn)
                        elif "error" in reply:
                            raise ServerDied(reply["error"])
                        continue
                    data = os.read(key.fd, 65536)
                    if data:
                        chunks[key.fd] += data
                    else:
                        sel.unregister(key.fd)
        finally:
            sel.close()
            os.close(out_r)
            os.close(err_r)
        if status is None:
            raise ServerDied("the preloaded server did not report the run's exit")
        return bytes(chunks[out_r]), bytes(chunks[err_r]), status, killed

    def close(self) -> None:
        """End the server (EOF on its socket) and reap it; again is a no-op."""
        if self._conn.fileno() == -1:
            return
        self._conn.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _text(data: bytes) -> str:
    # What subprocess's text mode makes of a pipe's bytes: the locale's encoding,
    # universal newlines.
    return io.TextIOWrapper(io.BytesIO(data)).read()


# This process's servers by preload script (None: `import torch`), each with the pid that
# started it: a fork of pytest does not share its parent's servers.
_servers: dict[str | None, tuple[int, Server]] = {}
_cannot_start: dict[str | None, str] = {}  # once one failed to start, its runs are fresh


def server(env: dict[str, str], preload: str | None = None) -> Server:
    """This process's server for ``preload``, (re)started with ``env`` when there is none,
    it died, or it started from other import-time values than ``env`` has: pytest's own
    environment can change (torch 2.9's Inductor sets TORCHINDUCTOR_CACHE_DIR on its first
    compile), and a fork would carry the old values."""
    owner, known = _servers.get(preload, (None, None))
    if known is not None and (owner != os.getpid() or not known.alive()
                              or import_time_differences(env, known.env)):
        if owner == os.getpid():
            known.close()
        known = None
    if known is None:
        known = Server(env, preload)
        _servers[preload] = (os.getpid(), known)
    return known


def current(preload: str | None = None) -> Server | None:
    """The server this process started for ``preload``, if any."""
    owner, known = _servers.get(preload, (None, None))
    return known if owner == os.getpid() else None


def run(code: str, *, env: dict[str, str], cwd: str, timeout: float | None,
        preload: str | None = None) -> subprocess.CompletedProcess[str] | None:
    """``code`` run as `python -c` in a fork of the preloaded interpreter (one that ran the
    script ``preload`` instead of `import torch`, given one: to warm a cache each run would
    fill again); None when that cannot be the same as a fresh interpreter (``env`` differs
    in an import-time variable from the server's) or the server cannot start (a fresh run
    shows why)."""
    if preload in _cannot_start:
        return None
    base = dict(os.environ)
    if import_time_differences(env, base):
        return None  # the run itself sets them: only a fresh interpreter reads them
    try:
        return server(base, preload).run(code, env=env, cwd=cwd, timeout=timeout)
    except (BrokenPipeError, ConnectionResetError):
        # It died between runs (before this one started): once more with a new one.
        return server(base, preload).run(code, env=env, cwd=cwd, timeout=timeout)
    except ServerDied as exc:
        if "did not start" not in str(exc):
            raise
        _cannot_start[preload] = str(exc)
        return None


def run_preloaded(preload: str, code: str, *, env: dict[str, str], cwd: str,
                  timeout: float | None) -> subprocess.CompletedProcess[str]:
    """``run`` in a fork of the server that ran ``preload``, or in a fresh interpreter where
    ``run`` cannot (test_codegen.py's generator runs)."""
    done = run(code, env=env, cwd=cwd, timeout=timeout, preload=preload)
    if done is not None:
        return done
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)


@atexit.register
def shutdown() -> None:
    for owner, known in _servers.values():
        if owner == os.getpid():
            known.close()
    _servers.clear()

