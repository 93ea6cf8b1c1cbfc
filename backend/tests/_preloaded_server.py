"""A fork server for the suite's `python -c` runs: `import torch` once, fork per run.

    python _preloaded_server.py FD [PRELOAD]

FD is one end of a unix socketpair (``_preloaded.py`` holds the other). The server imports
what `import torch` imports in a fresh interpreter with its environment (torch_openreg too,
when the entry point autoloads it), or, given PRELOAD, runs that script instead (in a
module of its own: what it imports and caches is warm in every fork), freezes the GC (so the forks do not copy-on-write the
heap when they collect), then serves one request at a time:

- ``run``: code, the full environment, a cwd, and two fds (the caller's stdout/stderr
  pipes) as SCM_RIGHTS. A forked child becomes what `python -c code` would be there and
  runs the code; the server replies ``started`` (the child's pid, also its process group),
  then ``exited`` with the raw wait status once the child is reaped. A ``kill`` message
  meanwhile SIGKILLs the child's process group (the caller's timeout).
- ``status``: the server's own state (the tests check it never initialised the device).

It must never initialise a device runtime: a child forked from a process whose runtime
started (threads, driver state) cannot use the device, and openreg refuses to, as CUDA
does. Only imports happen here. The server exits when the caller's end closes.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import selectors
import signal
import socket
import struct
import sys

_PR_SET_PDEATHSIG = 1
_HEADER = struct.Struct("!I")


def send(conn: socket.socket, message: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    payload = _HEADER.pack(len(data)) + data
    if fds:
        sent = socket.send_fds(conn, [payload], fds)
        conn.sendall(payload[sent:])
    else:
        conn.sendall(payload)


def _recv_exactly(conn: socket.socket, n: int) -> bytes | None:
    chunks = b""
    while len(chunks) < n:
        chunk = conn.recv(n - len(chunks))
        if not chunk:
            return None
        chunks += chunk
    return chunks


def recv(conn: socket.socket) -> tuple[dict | None, list[int]]:
    """One message and the fds sent with it; (None, []) at EOF."""
    # The fds ride on the first bytes of the message, so they come with its header.
    head, fds, _flags, _addr = socket.recv_fds(conn, _HEADER.size, 2)
    if not head:
        return None, []
    if len(head) < _HEADER.size:
        rest = _recv_exactly(conn, _HEADER.size - len(head))
        if rest is None:
            return None, fds
        head += rest
    body = _recv_exactly(conn, _HEADER.unpack(head)[0])
    return (json.loads(body) if body is not None else None), fds


def _preload(script: str | None = None) -> None:
    if script is not None:
        import runpy

        runpy.run_path(script, run_name="_preloaded_script")
        return
    # Exactly what a fresh `import torch` loads: with autoload on, that includes
    # torch_openreg (via its entry point); with it off, the run imports it itself.
    import torch  # noqa: F401


def _status() -> dict:
    openreg = sys.modules.get("torch_openreg.openreg")
    c_ext = sys.modules.get("torch_openreg._C")
    return {
        "pid": os.getpid(),
        "threads": len(os.listdir("/proc/self/task")),
        "torch_openreg": "torch_openreg" in sys.modules,
        # The Python flag and the C++ runtime's own: either set means the device started.
        "openreg_initialized": getattr(openreg, "_initialized", None),
        "runtime_initialized": c_ext._is_initialized() if c_ext is not None else None,
    }


def _become_child(conn: socket.socket, request: dict, fds: list[int], server: int) -> None:
    """In the forked child: the process `python -c` would be, minus the import."""
    conn.close()
    os.setpgid(0, 0)  # its own group: a timeout kills it and whatever it started
    # Dies with the server: nothing outlives the caller's view of the run.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != server:
        os._exit(137)
    out, err = fds
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.close(out)
    os.close(err)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    # State a fresh interpreter would compute from the new environment or anew.
    import random
    import tempfile

    tempfile.tempdir = None  # TMPDIR may differ from the server's
    random.seed()  # a fresh interpreter seeds from os.urandom; forks would share one


def _supervise(conn: socket.socket, pid: int) -> int | None:
    """Wait for the child, killing its group on request; its wait status, or None when
    the caller went away (the child is then killed and reaped)."""
    try:
        pidfd: int | None = os.pidfd_open(pid)
    except OSError:  # an old kernel or a seccomp profile without it: poll instead
        pidfd = None
    sel = selectors.DefaultSelector()
    if pidfd is not None:
        sel.register(pidfd, selectors.EVENT_READ)
    sel.register(conn, selectors.EVENT_READ)
    gone = False
    try:
        while True:
            events = sel.select(None if pidfd is not None else 0.01)
            if pidfd is None:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    return None if gone else status
            for key, _ in events:
                if key.fileobj is pidfd:
                    status = os.waitpid(pid, 0)[1]
                    return None if gone else status
                message, fds = recv(conn)
                for fd in fds:
                    os.close(fd)
                if message is None:  # the caller is gone: so is its run
                    gone = True
                    sel.unregister(conn)
                if message is None or message.get("kind") == "kill":
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(pid, signal.SIGKILL)
    finally:
        sel.close()
        if pidfd is not None:
            os.close(pidfd)


def serve(conn: socket.socket) -> dict:
    """Serve until EOF (then exit); returns only in a forked child, its request."""
    server = os.getpid()
    while True:
        request, fds = recv(conn)
        if request is None:
            sys.exit(0)
        if request["kind"] == "status":
            send(conn, _status())
            continue
        if request["kind"] != "run" or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            send(conn, {"error": f"bad request {request.get('kind')!r} with {len(fds)} fds"})
            continue
        pid = os.fork()
        if pid == 0:
            _become_child(conn, request, fds, server)
            return request
        with contextlib.suppress(OSError):  # also here: a kill may come before the child ran
            os.setpgid(pid, pid)
        for fd in fds:
            os.close(fd)
        send(conn, {"started": pid})
        status = _supervise(conn, pid)
        if status is None:
            sys.exit(0)
        send(conn, {"exited": status})


def run_as_main(code: str) -> None:
    """Run ``code`` as `python -c` does: in a new ``__main__``, argv ['-c'], '' on
    sys.path; an uncaught exception prints its traceback (without this frame) and exits 1;
    SystemExit and the interpreter's own exit (atexit, flushing) are Python's."""
    import builtins
    import importlib.machinery
    import types

    # The globals a `-c` __main__ starts with (its __spec__ is None).
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    main.__loader__ = importlib.machinery.BuiltinImporter
    main.__annotations__ = {}
    sys.modules["__main__"] = main
    sys.argv = ["-c"]
    sys.orig_argv = [sys.orig_argv[0], "-c", code]
    try:
        exec(compile(code, "<string>", "exec"), main.__dict__)
    except SystemExit:
        raise
    except BaseException:
        kind, value, tb = sys.exc_info()
        tb = tb.tb_next if tb is not None else None  # from the code's own frame on
        assert value is not None
        sys.excepthook(kind, value.with_traceback(tb), tb)
        if kind is KeyboardInterrupt:  # as Python does: die of the signal
            sys.stdout.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        sys.exit(1)


def main() -> None:
    conn = socket.socket(fileno=int(sys.argv[1]))
    # `python -c` puts '' (the cwd) first on sys.path where a script gets its directory;
    # with -P / PYTHONSAFEPATH (the recipe's env) neither gets anything.
    if not sys.flags.safe_path:
        sys.path[0] = ""
    _preload(sys.argv[2] if len(sys.argv) > 2 else None)
    gc.collect()
    gc.freeze()
    send(conn, {"ready": _status()})
    request = serve(conn)
    del conn
    run_as_main(request["code"])


if __name__ == "__main__":
    main()
