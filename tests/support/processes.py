"""Servers and workers a test runs as real processes, and stops: the API under uvicorn and
Celery workers, each in a process group of its own (a signal reaches its children too) with
its output in ``<logs>/<name>.log``.

    procs = Processes(tmp_path / "logs")
    procs.start("api", uvicorn_api(port), env)
    procs.wait_healthy("api", f"http://127.0.0.1:{port}/healthz", 30)
    procs.start("worker-w1", celery_worker("w1"), env)
    ...
    procs.stop()  # SIGTERM to every group, SIGKILL to any still there after the grace time
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from celery import Celery

from tests.support.paths import REPO_ROOT
from tests.support.waiting import empty_broker, wait_until


def celery_worker(
    name: str, *, pool: str = "prefork", concurrency: int | None = 1, loglevel: str | None = "INFO"
) -> list[str]:
    """A Celery worker of ootci's queue named ``name@host``, without gossip, mingle and
    heartbeat (nothing else is in the cluster to talk to)."""
    argv = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", f"--pool={pool}"]
    if concurrency is not None:
        argv += ["-c", str(concurrency)]
    argv += ["-Q", "ootci", "-n", f"{name}@%h"]
    if loglevel is not None:
        argv.append(f"--loglevel={loglevel}")
    return [*argv, "--without-gossip", "--without-mingle", "--without-heartbeat"]


def uvicorn_api(port: int) -> list[str]:
    """The API as production serves it: uvicorn with the app factory, on 127.0.0.1:port."""
    return [sys.executable, "-m", "uvicorn", "service.api.app:app_factory", "--factory",
            "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]


def answers(url: str) -> bool:
    """Whether GET ``url`` answers 200 now (a health check)."""
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@dataclass
class Processes:
    logs: Path
    cwd: Path = REPO_ROOT
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(
        self, name: str, argv: Sequence[str], env: Mapping[str, str], *, log: str | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` as ``name``, its output in ``<logs>/<log or name>.log``."""
        assert name not in self.procs, f"a process named {name} was started already"
        self.logs.mkdir(parents=True, exist_ok=True)
        with (self.logs / f"{log or name}.log").open("wb") as out:
            proc = subprocess.Popen(
                list(argv), cwd=self.cwd, env=dict(env), stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs[name] = proc
        return proc

    def tail(self, chars: int = 4000) -> str:
        """The end of every log, for a failure message."""
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-chars:]}"
                         for p in sorted(self.logs.glob("*.log")))

    def wait_healthy(self, name: str, url: str, timeout: float) -> None:
        """Until ``url`` answers 200; fails at once when process ``name`` exits."""
        proc = self.procs[name]

        def up() -> bool:
            assert proc.poll() is None, f"{name} exited with {proc.returncode}\n{self.tail()}"
            return answers(url)

        wait_until(up, timeout, lambda: f"{name} to answer at {url}\n{self.tail()}")

    def signal(self, sig: int, *, running_only: bool = True) -> None:
        """``sig`` to the process group of every process (still running, by default: a
        group whose leader exited may still hold its children)."""
        for proc in self.procs.values():
            if proc.poll() is None or not running_only:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)

    def stop(self, grace_s: float = 20) -> None:
        """SIGTERM to every group; SIGKILL to a group whose leader outlives ``grace_s``."""
        self.signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def kill(self) -> None:
        """SIGKILL to every group, and reap."""
        self.signal(signal.SIGKILL, running_only=False)
        for proc in self.procs.values():
            proc.wait()


@contextlib.contextmanager
def solo_worker(
    name: str, broker_url: str, tmp: Path, settings: Mapping[str, str]
) -> Iterator[Celery]:
    """One real Celery worker taking one task at a time (so the order it takes them in is
    the queue's), configured by ``settings`` (OOTCI_* variables; none leak in from this
    process), and a client of its queue. The broker's database is empty before and after."""
    from celery import Celery

    broker = empty_broker(broker_url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    env.update({"OOTCI_HOME": str(tmp / "home"), "OOTCI_BROKER_URL": broker_url, **settings})
    processes = Processes(tmp / "logs")
    processes.start("worker", celery_worker(name, pool="solo", concurrency=None), env)
    client = Celery("ootci", broker=broker_url)
    client.conf.task_default_queue = "ootci"
    try:
        yield client
    finally:
        processes.stop(grace_s=30)
        broker.flushdb()
        print(processes.tail())
