"""The preloaded interpreter (_preloaded.py) keeps `python -c`'s contract.

Real processes throughout: each test would fail if a run through the fork server could be
told apart from a fresh interpreter where the suite looks (exit status, signals, output,
environment, timeouts, leftover state) or if the server started the device before forking.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import _preloaded
import pytest
from conftest import retarget
from conftest import run_python as _run_python


def run_python(code: str, **kwargs) -> subprocess.CompletedProcess[str]:
    """The snippets here are written for the openreg device, as the `python` fixture's are;
    under another runtime (TORCH_OPENREG_RUNTIME) they name that runtime's device."""
    return _run_python(retarget(code), **kwargs)


def _server() -> _preloaded.Server:
    run_python("pass")  # started (or restarted) the way the suite's runs start it
    known = _preloaded.current()
    assert known is not None
    return known


def _parent_of_run(**kwargs) -> int:
    return int(run_python("import os; print(os.getppid())", **kwargs).stdout)


def _gone(pid: int, within_s: float = 10) -> bool:
    """Dead within ``within_s``: no such process, or a zombie no one reaped yet."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


SNIPPETS = {
    "output": "import sys; print('out'); print('err', file=sys.stderr); print('no newline', end='')",
    "main": ("import os, sys\n"
             "print(__name__, sys.argv, sys.orig_argv[1:], sys.path, os.getcwd(), sys.flags)\n"
             "print(sorted(globals()), __loader__, __spec__)"),
    "exit code": "import sys; print('bye', flush=True); sys.exit(3)",
    "exit message": "raise SystemExit('goodbye')",
    "exception": "def f():\n    raise ValueError('boom')\nprint('x')\nf()",
    "syntax error": "print('never'\nx = ",
    "atexit": "import atexit; atexit.register(print, 'at exit'); print('first')",
    "abort": "import os; print('before', flush=True); os.abort()",
    "segfault": "import ctypes; ctypes.c_char.from_address(8).value",
    "kill": "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
    "device": ("import torch, torch_openreg\n"
               "x = torch.arange(4.0, device='openreg') * 2\n"
               "print(x.device, x.sum().item(), torch.openreg.is_initialized())"),
}


def _comparable(stderr: str) -> str:
    """``stderr`` without what differs between any two processes, or fresh and forked:
    with PYTHONFAULTHANDLER (ootci's test step sets it) a fatal signal dumps the thread's
    id, the stack (a preloaded run's goes on into the server's frames below the code's)
    and the extension modules loaded (the server preloaded torch's). Kept: the error and
    the code's own innermost frame."""
    if not stderr.startswith("Fatal Python error:"):
        return stderr
    lines = stderr.splitlines()
    return "\n".join([lines[0], *[line for line in lines if '"<string>"' in line][:1]])


@pytest.mark.parametrize("name", SNIPPETS)
def test_a_run_equals_a_fresh_run(name):
    code = SNIPPETS[name]
    preloaded, fresh = run_python(code), run_python(code, fresh=True)
    assert _parent_of_run() != os.getpid()  # the first did go through the server
    assert (preloaded.returncode, preloaded.stdout, _comparable(preloaded.stderr)) == (
        fresh.returncode, fresh.stdout, _comparable(fresh.stderr))
    assert preloaded.args == fresh.args == [sys.executable, "-c", retarget(code)]
    if name in ("abort", "segfault", "kill"):
        assert preloaded.returncode < 0  # died of the signal, as the fresh one did


def test_exit_statuses_are_the_subprocess_ones():
    assert run_python("import sys; sys.exit(7)").returncode == 7
    assert run_python("import os; os._exit(9)").returncode == 9
    assert run_python("import os; os.abort()").returncode == -signal.SIGABRT
    assert run_python("import ctypes; ctypes.c_char.from_address(8).value").returncode == -signal.SIGSEGV
    r = run_python("raise KeyError('k')")
    assert r.returncode == 1
    assert r.stderr.startswith("Traceback (most recent call last):\n  File \"<string>\"")
    assert r.stderr.endswith("KeyError: 'k'\n")
    assert "_preloaded" not in r.stderr


def test_output_larger_than_a_pipe_buffer():
    r = run_python("""
        import sys
        sys.stdout.write("o" * (3 << 20))
        sys.stderr.write("e" * (3 << 20))
        sys.stdout.write("\\nend")
    """)
    assert r.returncode == 0
    assert r.stdout == "o" * (3 << 20) + "\nend"
    assert r.stderr == "e" * (3 << 20)


def test_env_is_applied_in_the_child_only():
    r = run_python("import os; print(os.environ.get('OOTCI_PROBE'), os.environ.get('PATH'))",
                   env={"OOTCI_PROBE": "here", "PATH": "/nowhere"})
    assert r.stdout.split() == ["here", "/nowhere"]
    again = run_python("import os; print(os.environ.get('OOTCI_PROBE'), os.environ['PATH'])")
    assert again.stdout.split() == ["None", os.environ["PATH"]]
    assert "OOTCI_PROBE" not in os.environ


def test_tmpdir_is_the_runs_not_the_servers(tmp_path):
    r = run_python("import tempfile; print(tempfile.gettempdir())", env={"TMPDIR": str(tmp_path)})
    assert r.stdout.strip() == str(tmp_path)


def test_import_time_variables_get_a_fresh_interpreter():
    server = _server().proc.pid
    assert _parent_of_run() == server
    for name in ("OPENREG_NATIVE_KERNELS", "TORCH_OPENREG_RUNTIME", "TORCH_LOGS",
                 "PYTHONHASHSEED", "LD_PRELOAD", "OMP_NUM_THREADS"):
        other = os.environ.get(name, "") + "1"  # differs from pytest's, whatever that is
        assert _parent_of_run(env={name: other}) == os.getpid(), name
    assert _parent_of_run(fresh=True) == os.getpid()
    assert _parent_of_run(env={"OOTCI_ANYTHING": "1"}) == server
    # Read at the runtime's first query, not by the import: forks, with the run's value.
    for name in _preloaded.FIRST_USE_NAMES:
        assert _parent_of_run(env={name: "1"}) == server, name


@pytest.mark.parametrize("count", ["3", "0"])
def test_a_fork_counts_the_devices_its_own_environment_sets(count):
    # The server imported torch (and torch_openreg) with pytest's environment: nothing in
    # it may have asked the runtime for the device count, or a fork would report that one.
    r = run_python("import os, torch, torch_openreg\n"
                   "print(os.getppid(), torch.openreg.device_count())",
                   env={"OPENREG_DEVICE_COUNT": count, "SHMREG_DEVICE_COUNT": count})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(_server().proc.pid), count]


def test_a_fork_gets_the_device_memory_its_own_environment_sets():
    r = run_python("import os, torch, torch_openreg\n"
                   "print(os.getppid(), torch.openreg.mem_get_info(0)[1])",
                   env={"OPENREG_DEVICE_MEMORY": str(64 << 20),
                        "SHMREG_DEVICE_MEMORY": str(64 << 20)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(_server().proc.pid), str(64 << 20)]


def test_a_change_to_pytests_own_environment_restarts_the_server(monkeypatch):
    # torch 2.9's Inductor sets TORCHINDUCTOR_CACHE_DIR in os.environ at its first
    # compile: later runs must see it, as a fresh interpreter would, and still be forks.
    before = _server().proc.pid
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/nonexistent/set-by-the-suite")
    r = run_python("import os; print(os.getppid(), os.environ['TORCHINDUCTOR_CACHE_DIR'])")
    parent, seen = r.stdout.split()
    assert seen == "/nonexistent/set-by-the-suite"
    assert int(parent) not in (before, os.getpid())  # a new server's child
    assert int(parent) == _server().proc.pid


def test_a_preload_script_serves_forks_of_its_own(tmp_path):
    # run_preloaded (test_codegen.py's generator runs): a server that ran the script
    # instead of `import torch`, with the same contract for its runs.
    script = tmp_path / "warm.py"
    script.write_text("import decimal\n")
    code = "import os, sys; print(os.getppid(), 'decimal' in sys.modules, 'torch' in sys.modules)"
    env = dict(os.environ)
    first = _preloaded.run_preloaded(str(script), code, env=env, cwd=str(tmp_path), timeout=60)
    again = _preloaded.run_preloaded(str(script), code, env=env, cwd=str(tmp_path), timeout=60)
    assert first.returncode == 0, first.stderr
    parent, warm, torch_loaded = first.stdout.split()
    assert (warm, torch_loaded) == ("True", "False")
    assert int(parent) not in (os.getpid(), _server().proc.pid)
    assert again.stdout == first.stdout  # the same server's fork
    crash = _preloaded.run_preloaded(str(script), "import os; os.abort()", env=env,
                                     cwd=str(tmp_path), timeout=60)
    assert crash.returncode == -signal.SIGABRT
    fresh = _preloaded.run_preloaded(str(script), code, env=dict(env, PYTHONHASHSEED="7"),
                                     cwd=str(tmp_path), timeout=60)
    assert int(fresh.stdout.split()[0]) == os.getpid()  # an import-time variable: fresh


def test_import_time_differences_compares_both_ways():
    diff = _preloaded.import_time_differences
    assert diff({"PATH": "a", "TORCH_X": "1"}, {"PATH": "b", "TORCH_X": "1"}) == []
    assert diff({"OPENREG_NATIVE_KERNELS": "0"}, {}) == ["OPENREG_NATIVE_KERNELS"]
    assert diff({"OPENREG_DEVICE_COUNT": "3", "SHMREG_DEVICE_MEMORY": "1"}, {}) == []
    assert diff({}, {"LD_PRELOAD": "x.so"}) == ["LD_PRELOAD"]
    assert diff({"LANG": "C"}, {"LANG": "C.UTF-8"}) == ["LANG"]


def test_timeout_kills_the_whole_group():
    with pytest.raises(subprocess.TimeoutExpired) as caught:
        run_python("""
            import subprocess, time
            p = subprocess.Popen(["sleep", "600"])
            print(p.pid, flush=True)
            time.sleep(600)
        """, timeout=3)
    assert caught.value.timeout == 3
    assert caught.value.cmd[:2] == [sys.executable, "-c"]
    assert _gone(int(caught.value.output))  # the grandchild
    assert run_python("print('next')").stdout == "next\n"  # the server goes on


def test_a_killed_server_is_restarted():
    old = _server().proc
    old.kill()
    old.wait()
    r = run_python("import os; print(os.getppid())")
    assert r.returncode == 0
    assert int(r.stdout) == _server().proc.pid != old.pid


def test_a_server_dying_mid_run_takes_the_run_along(tmp_path):
    server = _server().proc.pid
    with pytest.raises(_preloaded.ServerDied):
        run_python(f"""
            import os, signal, time
            open({str(tmp_path / "pid")!r}, "w").write(str(os.getpid()))
            os.kill(os.getppid(), signal.SIGKILL)
            time.sleep(600)
        """, timeout=60)
    assert _gone(server)
    assert _gone(int((tmp_path / "pid").read_text()))  # killed with its server
    assert run_python("print('again')").stdout == "again\n"


def test_no_state_leaks_from_one_run_to_the_next():
    first = run_python("""
        import json, os, sys, torch, torch_openreg
        json.LEAKED = 1
        sys.path.append("/leaked")
        os.environ["LEAKED"] = "1"
        torch.ones(1, device="openreg")
        print(torch.openreg.is_initialized())
    """)
    assert first.stdout.split() == ["True"], first.stderr
    second = run_python("""
        import json, os, sys, torch, torch_openreg
        print(hasattr(json, "LEAKED"), "/leaked" in sys.path, "LEAKED" in os.environ,
              torch.openreg._initialized, torch_openreg._C._is_initialized(),
              torch_openreg._C._is_in_bad_fork())
        print(torch.ones(2, device="openreg").sum().item())
    """)
    assert second.stdout.split() == ["False"] * 6 + ["2.0"], second.stderr


def test_the_server_never_initialises_the_device():
    server = _server()
    run_python("import torch, torch_openreg; torch.ones(1, device='openreg'); torch.openreg.init()")
    status = server.status()
    assert status["pid"] == server.proc.pid
    assert status["torch_openreg"] is True  # preloaded: the autoload entry point ran
    assert status["openreg_initialized"] is False
    assert status["runtime_initialized"] is False
    # No thread besides the main one: none of a runtime's workers, and fork() is safe.
    assert status["threads"] == 1
    assert len(os.listdir(f"/proc/{server.proc.pid}/task")) == 1


def test_random_state_differs_between_runs():
    code = "import random; print(random.random())"
    assert run_python(code).stdout != run_python(code).stdout


def test_an_interrupted_run_does_not_answer_for_the_next():
    class Interrupted(Exception):
        pass

    def interrupt(*_):
        raise Interrupted

    _server()  # running: the interrupt is to hit the run, not the server's start
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)  # as a per-test timeout plugin would
        with pytest.raises(Interrupted):
            run_python("import sys, time; time.sleep(2); sys.exit(3)")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    r = run_python("print('next')")
    assert (r.returncode, r.stdout) == (0, "next\n")


def test_a_server_that_cannot_start_says_why(tmp_path):
    (tmp_path / "torch.py").write_text("raise ImportError('no torch here')")
    with pytest.raises(_preloaded.ServerDied, match="did not start(.|\n)*no torch here"):
        _preloaded.Server(dict(os.environ, PYTHONPATH=str(tmp_path)))
