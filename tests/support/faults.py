"""What the fault-injection suite (tests/faults/) shares: a backend whose build the test
steers through files, `ootci` as a real process, and finding processes by a marker."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.pyonly import write_pyonly_backend

ROOT = Path(__file__).resolve().parents[2]

# argv[1] is the test's marker: the build and the grandchild it leaves carry it, so the
# test finds them among all processes by their command line, whatever pid namespace the
# sandbox put them in. Until `go` exists in the steering dir (@HERE@: outside the tree,
# which the run copies, and outside /tmp, which a sealed build does not see), the build
# prints 1 KB every 20 ms (enough to fill a pipe nobody drains within a second); then it
# prints `lines` more.
BUILD_SCRIPT = """\
import pathlib, subprocess, sys, time
marker = sys.argv[1]
here = pathlib.Path("@HERE@")
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", marker],
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("building", flush=True)
deadline = time.time() + 300
while not (here / "go").exists() and time.time() < deadline:
    print("waiting " + "x" * 1000, flush=True)
    time.sleep(0.02)
for i in range(int((here / "go").read_text() or 0) if (here / "go").exists() else 0):
    print(f"line {i} " + "y" * 100, flush=True)
print("built", flush=True)
"""

RECIPE = """\
[backend]
name = "faulty"

[build]
command = ["{{python}}", "build_script.py", "{marker}"]

[test]
command = ["{{python}}", "-m", "pytest", "tests", "-p", "no:cacheprovider", "--junitxml={{junit}}"]
timeout_per_test = 120
"""

SUITE = "def test_ok():\n    assert 1 + 1 == 2\n"


def _steering_dir(backend: Path) -> Path:
    return backend / "steer"  # a link to the dir the build watches


def write_fault_backend(root: Path, marker: str) -> Path:
    backend = write_pyonly_backend(root, {"test_ok.py": SUITE})
    (backend / "ootci.toml").write_text(RECIPE.format(marker=marker))
    steer = Path(tempfile.mkdtemp(prefix="ootci-steer-", dir="/var/tmp"))
    steer.chmod(0o755)
    atexit.register(shutil.rmtree, steer, True)
    _steering_dir(backend).symlink_to(steer)
    (backend / "build_script.py").write_text(BUILD_SCRIPT.replace("@HERE@", str(steer)))
    # The sandbox runs the build as another uid: it must reach the tree through tmp_path.
    for parent in [backend, *backend.parents]:
        if parent == Path("/"):
            break
        parent.chmod(parent.stat().st_mode | 0o755)
    os.chmod(backend, 0o777)
    return backend


def let_build_finish(backend: Path, extra_lines: int = 0) -> None:
    (_steering_dir(backend) / "go").write_text(str(extra_lines))


def pids_with(marker: str) -> list[int]:
    """Live processes (zombies excepted) whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def ootci_env(home: Path, **settings: str) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    environ.update({"OOTCI_HOME": str(home), "COLUMNS": "200", **settings})
    return environ


# `python -m service.cli`, with `resume` mounted if the app does not have it yet (the
# command lives in service/cli/resume.py; service/cli/app.py mounts it).
_OOTCI = """\
import importlib
from service.cli.resume import resume
app = importlib.import_module("service.cli.app").app
if not any(c.callback is resume for c in app.registered_commands):
    app.command()(resume)
app(prog_name="ootci")
"""


def ootci(home: Path, *args: str, timeout: float = 300, **settings: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _OOTCI, *args],
        cwd=ROOT, env=ootci_env(home, **settings), capture_output=True, text=True, timeout=timeout,
    )


def start_ootci(home: Path, *args: str, log: Path, **settings: str) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "service.cli", *args],
            cwd=ROOT, env=ootci_env(home, **settings), stdout=out, stderr=subprocess.STDOUT,
        )


def kill_9(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL and reap (a zombie still answers to its PID)."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)


@contextlib.contextmanager
def small_disk(where: Path, size_kb: int) -> Iterator[Path]:
    """A tmpfs of ``size_kb`` mounted at ``where`` (root only: skipped otherwise)."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kb}k,mode=0777", "tmpfs", str(where)],
        capture_output=True, text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill_disk(disk: Path, leave_kb: int) -> Path:
    """A file taking all of ``disk`` but ``leave_kb``."""
    stats = os.statvfs(disk)
    free = stats.f_bavail * stats.f_frsize
    filler = disk / "filler"
    with filler.open("wb") as f:
        f.write(b"\0" * max(0, free - leave_kb * 1024))
    return filler
