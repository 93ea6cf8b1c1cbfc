"""Concurrent views of one big stored step log against a real API process, and the
process's peak resident memory (VmHWM) they cost. Shared by
tests/unit/service/api/test_log_view_memory.py and benchmarks/log_views.py."""

from __future__ import annotations

import os
import sys
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path

import httpx
from sqlalchemy import Engine

from service.commands.log_chunks import append_log_chunk
from service.commands.runs import create_run, get_or_create_backend
from service.db import session_scope
from service.models import Step, StepStatus
from tests.support import redis_dbs
from tests.support.live_server import free_port
from tests.support.processes import Processes


def build_log(size: int) -> bytes:
    """A compiler-ish log of ``size`` bytes that compresses like a real one (about 10x)."""
    lines = []
    total = 0
    i = 0
    while total < size:
        line = (f"[{i:>9}/{size // 90}] g++ -O2 -fPIC -Iinclude -c src/ops/kernel_{i % 977}.cpp "
                f"-o build/kernel_{i % 977}.o  # warning: unused variable 'v{(i * 7919) % 10007}'\n")
        lines.append(line)
        total += len(line)
        i += 1
    return "".join(lines).encode()[:size]


def store_step_log(engine: Engine, data: bytes, *, as_stored_now: bool = False) -> int:
    """A finished run whose build step stored ``data``; its run id. By default as a log
    stored before its lines were counted and indexed (the worst case: read through); with
    ``as_stored_now`` as the worker stores it today (``Step.store_log``)."""
    with session_scope(engine) as s:
        backend = get_or_create_backend(s, "acme", "/srv/acme")
        run = create_run(s, backend, "installed", trigger="cli")
        s.flush()
        step = Step(run_id=run.id, name="build", status=StepStatus.FAILED)
        if as_stored_now:
            step.store_log(data)
        else:
            step.log_compressed = zlib.compress(data, 6)
            step.log_size = len(data)
            step.log_tail = data[-64 * 1024:]
        s.add(step)
        return run.id


def cpu_seconds(pid: int) -> float:
    """User + system CPU time ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stream_step_log(engine: Engine, data: bytes, chunk: int = 64 * 1024) -> int:
    """A run whose build step is still running and has streamed ``data`` to ``log_chunks``
    in rows of ``chunk`` bytes (the worker's batch size), each with its newline count; its
    run id."""
    with session_scope(engine) as s:
        backend = get_or_create_backend(s, "acme", "/srv/acme")
        run = create_run(s, backend, "installed", trigger="cli")
        s.flush()
        step = Step(run_id=run.id, name="build", status=StepStatus.RUNNING)
        s.add(step)
        s.flush()
        step_id, run_id = step.id, run.id
    for first in range(0, len(data), 256 * chunk):  # a few MB per transaction
        with session_scope(engine) as s:
            for seq, at in enumerate(range(first, min(len(data), first + 256 * chunk), chunk),
                                     start=first // chunk):
                append_log_chunk(s, step_id, seq, at, data[at:at + chunk])
    return run_id


def peak_rss_mb(pid: int) -> float:
    """VmHWM of ``pid``: the most resident memory it ever had, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


@dataclass
class ApiProcess:
    url: str
    pid: int


def start_api(processes: Processes, database_url: str, home: Path) -> ApiProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    env.update({"OOTCI_HOME": str(home), "OOTCI_DATABASE_URL": database_url,
                "OOTCI_BROKER_URL": redis_dbs.url(redis_dbs.LOG_VIEWS)})
    port = free_port()
    proc = processes.start("api", [
        sys.executable, "-m", "uvicorn", "service.api.app:app_factory", "--factory",
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"], env)
    url = f"http://127.0.0.1:{port}"
    processes.wait_healthy("api", url + "/healthz", 60)
    return ApiProcess(url, proc.pid)


def concurrent_views(url: str, paths: list[str]) -> list[int]:
    """GET every path at once (one client each), reading each body through; the bytes of
    each answer."""
    got = [0] * len(paths)
    errors: list[str] = []
    start = threading.Barrier(len(paths))

    def view(i: int, path: str) -> None:
        start.wait()
        try:
            with httpx.stream("GET", url + path, timeout=600) as resp:
                if resp.status_code != 200:
                    errors.append(f"{path}: {resp.status_code}")
                for chunk in resp.iter_raw():
                    got[i] += len(chunk)
        except httpx.HTTPError as exc:
            errors.append(f"{path}: {exc!r}")

    threads = [threading.Thread(target=view, args=(i, p)) for i, p in enumerate(paths)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return got
