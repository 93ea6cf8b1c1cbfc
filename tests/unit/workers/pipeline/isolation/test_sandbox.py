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
from service.domain.classify import classify_log
from service.domain.verdict import ErrorKind, Stage
from tests.support.paths import REPO_ROOT
from workers.pipeline.isolation.procs import run_streaming, signal_of
from workers.pipeline.isolation.sandbox import (
    DiskBudget,
    Limits,
    SandboxUnusable,
    StepSandbox,
    probe,
    sandbox_for_build,
    sandbox_for_tests,
)
from workers.pipeline.logs.sink import LogSink

pytest_plugins = ["tests.support.dirs"]

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
    assert "disk budget 20480 MB" in header and "network on" not in header
    online = sandbox_for_build(settings, writable=[], visible=[], watched=[], network=True)
    assert "network on" in online.describe()
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


def test_a_dir_the_sandbox_uid_cannot_pass_is_hidden_and_what_is_needed_bound_back(
    tmp_path: Path,
) -> None:
    """Like the Python under a 0700 /root: the step still drops to the sandbox uid, sees
    the env it needs and nothing else of the private dir."""
    settings = Settings(home=tmp_path / "home")
    support = probe(settings.sandbox_uid)
    if not (support.root and support.setpriv and support.bwrap):
        pytest.skip(f"needs root, setpriv and bwrap: {support.describe()}")
    private = tmp_path / "private"
    (private / "env").mkdir(parents=True)
    (private / "env" / "lib.py").write_text("x = 1\n")
    (private / "env" / "lib.py").chmod(0o644)
    (private / "secret").write_text("s3cret\n")
    private.chmod(0o700)
    sandbox = sandbox_for_tests(settings, writable=[tmp_path / "w"], visible=[private / "env"],
                                watched=[])
    assert sandbox.uid == 65534 and any(private.is_relative_to(h) for h in sandbox.hidden)
    sandbox.prepare()
    code, out = _run(sandbox, (
        "import os\n"
        f"print('uid', os.getuid(), open('{private / 'env' / 'lib.py'}').read().strip())\n"
        f"print('secret there', os.path.exists('{private / 'secret'}'))\n"
    ), tmp_path / "w")
    assert code == 0, out
    assert "uid 65534 x = 1" in out and "secret there False" in out


def test_a_step_that_cannot_drop_root_is_refused_as_infra(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home")
    if probe(settings.sandbox_uid).setpriv is None:
        pytest.skip("not root or no setpriv: no uid drop to refuse")
    unreadable = tmp_path / "env"
    unreadable.mkdir(mode=0o700)
    sandbox = sandbox_for_build(settings, writable=[], visible=[unreadable], watched=[])
    said: list[str] = []
    with pytest.raises(SandboxUnusable) as refused:
        sandbox.prepare(said.append)
    why = f"ootci: sandbox: cannot set up the sandbox: {unreadable} is not readable by uid 65534"
    assert str(refused.value).startswith(why) and said == []  # describe() says it first
    assert refused.value.kind is ErrorKind.INFRA
    assert sandbox.describe() == str(refused.value)


def test_a_shielded_worker_environ_is_unreadable_to_its_same_uid_children(
    tmp_path: Path,
) -> None:
    # Root reads any /proc/<pid>/environ, so under root the "worker" and its child run in
    # the test step's sandbox as the sandbox uid. The worker holds a secret in its
    # environment; the child is a build running as the same uid.
    worker = (
        "import os, subprocess, sys\n"
        "from service.secrets import make_nondumpable\n"
        "assert make_nondumpable()\n"
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


def _sealed_for(tmp_path: Path, **kw: object) -> StepSandbox:
    settings = Settings(home=tmp_path / "home", sandbox_cpu_time_s=60)
    support = probe(settings.sandbox_uid)
    if not support.bwrap:
        pytest.skip(f"no working bwrap: {support.describe()}")
    sandbox = sandbox_for_build(settings, writable=[tmp_path / "w", tmp_path / "tmp"],
                                visible=[REPO_ROOT], watched=[tmp_path / "w", tmp_path / "tmp"],
                                tmp=tmp_path / "tmp", **kw)  # type: ignore[arg-type]
    sandbox.prepare()
    return sandbox


def test_a_setsid_daemon_does_not_outlive_its_step(tmp_path: Path) -> None:
    """The step's processes live in its pid namespace: when the step's command ends, the
    namespace goes and every process in it, a daemon that left the process group too."""
    sandbox = _sealed_for(tmp_path)
    pidfile = tmp_path / "w" / "daemon.pid"
    code, out = _run(sandbox, (
        "import subprocess, sys\n"
        "subprocess.Popen(['setsid', sys.executable, '-c', "
        "'import time, os; open(os.environ[\"P\"], \"w\").write(str(os.getpid())); "
        "time.sleep(120)'], env={'P': sys.argv[1] if len(sys.argv) > 1 else '"
        f"{pidfile}'}}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, "
        "stderr=subprocess.DEVNULL, start_new_session=True)\n"
        "import time, os\n"
        f"while not os.path.exists('{pidfile}'): time.sleep(0.05)\n"
        "print('daemon started')\n"
    ), tmp_path / "w")
    assert code == 0 and "daemon started" in out, out
    # The daemon's host pid: any process still sleeping with its command line.
    survivors = subprocess.run(["pgrep", "-f", "time.sleep\\(120\\)"], capture_output=True,
                               text=True).stdout.split()
    assert survivors == [], survivors


def test_honest_ipc_works_sealed(tmp_path: Path) -> None:
    """A private /dev/shm: POSIX semaphores (a fork context's Queue) and shared memory
    work for the sandbox uid; /tmp is the run's TMPDIR, so what goes there is the run's."""
    sandbox = _sealed_for(tmp_path)
    code, out = _run(sandbox, (
        "import multiprocessing as mp, os\n"
        "from multiprocessing import shared_memory\n"
        "q = mp.get_context('fork').Queue(); q.put('queued'); print(q.get(timeout=10))\n"
        "shm = shared_memory.SharedMemory(create=True, size=16); shm.buf[0] = 7\n"
        "print('shm', shm.buf[0]); shm.close(); shm.unlink()\n"
        "open('/tmp/marker', 'w').write('x')\n"
        "print('uid', os.getuid())\n"
    ), tmp_path / "w")
    assert code == 0, out
    assert "queued" in out and "shm 7" in out
    assert (tmp_path / "tmp" / "marker").read_text() == "x"  # counted in the run's TMPDIR
    if os.geteuid() == 0:
        assert "uid 65534" in out


def test_dev_shm_counts_against_the_disk_budget(tmp_path: Path) -> None:
    """/dev/shm is a dir in the run's TMPDIR, not the machine's memory: filling it trips the
    disk budget (the backend's verdict), never a tmpfs's ENOSPC (read as the machine's)."""
    settings = Settings(home=tmp_path / "home", sandbox_cpu_time_s=60, run_disk_budget_mb=8)
    if not probe(settings.sandbox_uid).bwrap:
        pytest.skip("no working bwrap")
    own = [tmp_path / "w", tmp_path / "tmp"]
    sandbox = sandbox_for_tests(settings, writable=own, visible=[REPO_ROOT], watched=own,
                                tmp=tmp_path / "tmp")
    sandbox.prepare()
    log = LogSink(tmp_path / "step.log")
    fill = ("import time\n"
            "with open('/dev/shm/fill', 'wb') as f:\n"
            "    for i in range(400):\n"
            "        f.write(b'x' * (1 << 20)); f.flush(); time.sleep(0.05)\n"
            "print('wrote 400 MB')\n")
    result = run_streaming(
        sandbox.command([sys.executable, "-c", fill], tmp_path / "w"), cwd=tmp_path / "w",
        env={"PATH": os.environ["PATH"]}, log=log, timeout_s=120,
        watchdog=sandbox.disk_budget(), preexec_fn=sandbox.preexec(),
    )
    log.close()
    text = (tmp_path / "step.log").read_text()
    assert result.killed_reason is not None, text
    assert "over its disk budget of 8 MB" in result.killed_reason
    assert "\nwrote 400 MB" not in text and "No space left" not in text
    finding = classify_log(text, Stage.TEST)
    assert finding is not None and finding.rule == "sandbox-disk-budget", finding


def test_the_root_is_read_only_but_the_run_dirs(tmp_path: Path) -> None:
    sandbox = _sealed_for(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    outside.chmod(0o777)  # only the mount can stop the write
    code, out = _run(sandbox, (
        "for target in ['/etc/cron.d/ootci-attack', "
        f"'{outside / 'x'}', '{REPO_ROOT / 'planted.pth'}', '{tmp_path / 'w' / 'ok'}']:\n"
        "    try: open(target, 'w').write('x'); print('wrote', target)\n"
        "    except OSError as e: print('denied', target, e.strerror)\n"
    ), tmp_path / "w")
    assert code == 0, out
    assert out.count("\ndenied") == 3 and f"wrote {tmp_path / 'w' / 'ok'}" in out
    assert not (outside / "x").exists() and not (REPO_ROOT / "planted.pth").exists()


def test_paths_reached_through_a_symlink_are_bound_resolved(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "w").mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    settings = Settings(home=tmp_path / "home")
    if not probe(settings.sandbox_uid).bwrap:
        pytest.skip("no working bwrap")
    sandbox = sandbox_for_build(settings, writable=[tmp_path / "link" / "w"],
                                visible=[], watched=[])
    assert sandbox.writable == (real / "w",)
    sandbox.prepare()
    code, out = _run(sandbox, "open('via-link', 'w').write('x'); print('ok')", tmp_path / "link" / "w")
    assert code == 0 and "ok" in out, out
    assert (real / "w" / "via-link").exists()


def test_a_sandbox_bwrap_cannot_set_up_is_an_infra_error_with_its_reason(
    tmp_path: Path,
) -> None:
    """bwrap refuses before the step's command runs: the step never starts, and the error
    is the machine's (infra) with bwrap's own words, never the backend's failure."""
    if not tmp_path.is_relative_to("/tmp"):
        pytest.skip("needs the test's dirs under /tmp")
    settings = Settings(home=tmp_path / "home")
    if not probe(settings.sandbox_uid).bwrap:
        pytest.skip("no working bwrap")
    sandbox = sandbox_for_build(settings, writable=[tmp_path / "w"], visible=[], watched=[],
                                tmp=tmp_path / "tmp")
    # A file where the sandbox must make the dir leading to the run's dirs under its /tmp
    # (the run's TMPDIR, as an earlier step left it): bwrap cannot mount there.
    (tmp_path / "tmp").mkdir()
    (tmp_path / "tmp" / tmp_path.relative_to("/tmp").parts[0]).write_text("in the way")
    said: list[str] = []
    with pytest.raises(SandboxUnusable) as refused:
        sandbox.prepare(said.append)
    assert str(refused.value).startswith("ootci: sandbox: cannot set up the sandbox: bwrap: ")
    assert refused.value.kind is ErrorKind.INFRA and said == [str(refused.value)]


def test_a_readable_file_a_step_needs_is_reachable_without_an_execute_bit(
    world_readable_dir: Path,
) -> None:
    """A file (say, the pytest.ini above every run tree) is read, not passed through: its
    missing x bit must not make the sandbox refuse the step as unreadable."""
    from workers.pipeline.isolation.sandbox import _blocker

    tmp_path = world_readable_dir
    ini = tmp_path / "pytest.ini"
    ini.write_text("[pytest]\n")
    ini.chmod(0o644)
    assert _blocker(ini, 65534) is None
    ini.chmod(0o600)
    assert _blocker(ini, 65534) == ini
    shut = tmp_path / "shut"
    shut.mkdir(mode=0o700)
    assert _blocker(shut / "x", 65534) == shut


def test_a_secret_file_ootci_read_is_hidden_from_the_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Docker or Kubernetes secret is a world-readable file (OOTCI_<NAME>_FILE, here
    outside /tmp, as /run/secrets is); the read-only root would show it to every step. The
    sandbox hides it (bound over by /dev/null, which a bind makes unopenable: nodev)."""
    import shutil
    import tempfile

    where = Path(tempfile.mkdtemp(dir="/var/tmp"))
    try:
        where.chmod(0o755)
        secret = where / "token"
        secret.write_text("from-a-mounted-secret-7c1")
        secret.chmod(0o644)
        monkeypatch.setenv("OOTCI_API_TOKEN_FILE", str(secret))
        sandbox = _sealed_for(tmp_path)
        code, out = _run(sandbox, f"print('read:', open({str(secret)!r}).read() or 'nothing')",
                         tmp_path / "w")
    finally:
        shutil.rmtree(where, ignore_errors=True)
    assert "from-a-mounted-secret" not in out
    assert "PermissionError" in out, out
