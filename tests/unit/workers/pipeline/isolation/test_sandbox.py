"""The sandbox's parts with real processes: rlimits trip with the kernel's own signals and
errors, the disk budget watches growth, the test step's namespaces take the network away,
and what the sandbox cannot do is said in the step's log header."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from service.config import Settings
from tests.support.paths import REPO_ROOT
from workers.pipeline.isolation.procs import run_streaming, signal_of
from workers.pipeline.isolation.sandbox import (
    DiskBudget,
    Limits,
    StepSandbox,
    probe,
    sandbox_for_build,
    sandbox_for_tests,
)
from workers.pipeline.logs.sink import LogSink

LIMITS = Limits(address_space_mb=4096, max_processes=64, file_size_mb=1, cpu_time_s=1,
                disk_budget_mb=1)


def _run(sandbox: StepSandbox, code: str, tmp_path: Path) -> tuple[int, str]:
    log = LogSink(tmp_path / "step.log")
    result = run_streaming(
        sandbox.command([sys.executable, "-c", code], tmp_path), cwd=tmp_path,
        env={"PATH": os.environ["PATH"]}, log=log, timeout_s=60, preexec_fn=sandbox.preexec(),
    )
    log.close()
    return result.returncode, (tmp_path / "step.log").read_text()


def test_file_size_limit_refuses_the_write(tmp_path: Path) -> None:
    code, out = _run(StepSandbox(LIMITS), "open('big', 'wb').write(b'x' * (2 << 20))", tmp_path)
    assert code == 1 and "OSError: [Errno 27] File too large" in out
    assert (tmp_path / "big").stat().st_size <= 1 << 20


def test_cpu_limit_sends_sigxcpu_not_sigkill(tmp_path: Path) -> None:
    code, _ = _run(StepSandbox(LIMITS), "while True: pass", tmp_path)
    sig = signal_of(code)
    assert sig is not None and sig.name == "SIGXCPU"


def test_disk_budget_counts_growth_in_blocks(tmp_path: Path) -> None:
    (tmp_path / "before").write_bytes(os.urandom(3 << 20))  # already there: not counted
    budget = DiskBudget([tmp_path], budget_mb=1)
    budget._checked = 0.0  # noqa: SLF001 - check now, not in a second
    assert budget() is None
    with (tmp_path / "sparse").open("wb") as f:  # 100 MB apparent, no blocks
        f.truncate(100 << 20)
    budget._checked = 0.0  # noqa: SLF001
    assert budget() is None
    (tmp_path / "fill").write_bytes(os.urandom(3 << 20))
    budget._checked = 0.0  # noqa: SLF001
    reason = budget()
    assert reason is not None and "over its disk budget of 1 MB" in reason
    assert budget() == reason  # stays tripped


def test_off_says_so(tmp_path: Path) -> None:
    off = sandbox_for_tests(Settings(home=tmp_path, sandbox=False), writable=[], visible=[],
                            watched=[])
    assert off.describe() == "ootci: sandbox: off (OOTCI_SANDBOX=false)"
    assert off.command(["x"], tmp_path) == ["x"] and off.preexec() is None


def test_header_names_every_layer(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home")
    header = sandbox_for_build(settings, writable=[tmp_path / "w"], visible=[],
                               watched=[]).describe()
    assert header.startswith("ootci: sandbox: rlimits (address space 262144 MB, 512 processes")
    assert "disk budget 20480 MB" in header and "network on" in header
    support = probe(settings.sandbox_uid)
    assert ("pid/ipc namespaces via bwrap" in header) == (support.bwrap is not None)


@pytest.fixture
def listener() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_test_step_has_no_network_and_cannot_see_the_worker(
    tmp_path: Path, listener: socket.socket
) -> None:
    settings = Settings(home=tmp_path / "home", sandbox_cpu_time_s=30)
    support = probe(settings.sandbox_uid)
    if support.bwrap is None and not support.netns:
        pytest.skip(f"no network namespace on this machine: {support.describe()}")
    sandbox = sandbox_for_tests(settings, writable=[tmp_path / "w"], visible=[], watched=[])
    sandbox.prepare()
    port = listener.getsockname()[1]
    code, out = _run(sandbox, (
        "import os, socket\n"
        f"try: socket.create_connection(('127.0.0.1', {port}), 2); print('CONNECTED')\n"
        "except OSError as e: print('refused', e)\n"
        f"print('worker visible', os.path.exists('/proc/{os.getpid()}/environ'))\n"
        # The sandbox's own loopback is up: gloo and a TCPStore talk to themselves on it.
        "own = socket.create_server(('127.0.0.1', 0))\n"
        "socket.create_connection(own.getsockname(), 2).sendall(b'x')\n"
        "print('own loopback', own.accept()[0].recv(1))\n"
    ), tmp_path)
    assert code == 0, out
    assert "\nrefused" in out and "\nCONNECTED" not in out
    assert "own loopback b'x'" in out
    if support.bwrap is not None:  # a pid namespace of its own
        assert "worker visible False" in out


def test_uid_drop_is_refused_and_reported_when_the_uid_cannot_read_the_env(
    tmp_path: Path,
) -> None:
    settings = Settings(home=tmp_path / "home")
    if probe(settings.sandbox_uid).setpriv is None:
        pytest.skip("not root or no setpriv: no uid drop to refuse")
    private = tmp_path / "private"
    (private / "env").mkdir(parents=True)
    private.chmod(0o700)
    sandbox = sandbox_for_tests(settings, writable=[], visible=[private / "env"], watched=[])
    assert sandbox.uid is None
    assert f"uid stays 0: {private / 'env'} is not readable by uid 65534" in sandbox.describe()


def test_a_shielded_worker_environ_is_unreadable_to_its_same_uid_children(
    tmp_path: Path,
) -> None:
    # Root reads any /proc/<pid>/environ, so under root the "worker" and its child run in
    # the test step's sandbox as the sandbox uid. The worker holds a secret in its
    # environment; the child is a build running as the same uid.
    worker = (
        "import os, subprocess, sys\n"
        "from workers.pipeline.isolation.sandbox import shield_worker_environ\n"
        "assert shield_worker_environ()\n"
        "child = 'import os; print(open(f\"/proc/{os.getppid()}/environ\", \"rb\").read())'\n"
        "r = subprocess.run([sys.executable, '-c', child], capture_output=True, text=True)\n"
        "print(r.stdout, r.stderr.splitlines()[-1] if r.stderr else '')\n"
    )
    root = REPO_ROOT
    sandbox = sandbox_for_tests(Settings(home=tmp_path / "home"), writable=[],
                                visible=[root], watched=[])
    if os.geteuid() == 0 and sandbox.uid is None:
        pytest.skip(f"root without an unprivileged sandbox uid: {sandbox.describe()}")
    proc = subprocess.run(
        sandbox.command([sys.executable, "-c", worker], root), cwd=root,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(root),
             "OOTCI_API_TOKEN": "tok-shielded"},
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "PermissionError" in proc.stdout and "tok-shielded" not in proc.stdout
