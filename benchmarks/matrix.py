"""A nightly matrix (3 backends x 3 torch targets) on one Celery worker process and on two.

    python benchmarks/matrix.py [--workers 1 2] [--targets SPEC ...] [--backends NAME ...]
                                [--pin] [--keep]

Backends: torch_openreg (``backend/``), the tiny C++ fixture backend
(``tests/fixtures/backends/tiny``) and a Python-only backend (``tests/support/pyonly.py``).
Targets by default: ``pip:torch==2.13.0`` (the local wheel in /opt/wheels, found through
pip's find-links), ``pip:torch==2.14.1`` (from the package index) and ``installed`` (the
torch 2.13.0 of the interpreter running ootci: a second spec resolving to 2.13.0).

For each worker count: a fresh OOTCI_HOME (cold caches), a fresh Postgres database, Redis
db 9 flushed, that many ``celery worker -c 1`` processes; the 9 runs are enqueued at once
and the clock stops at the last verdict. Printed: wall time to the last verdict, each
step's share of the summed step time, the bytes of each torch env (alone, then all envs
together: hard links count once), how many provisions reused a cached env, and the
verdicts. Target (issue #19): two workers <= 0.6x the wall time of one. The load average
is printed: the machine may be shared. So is how busy the cores were: if one worker
already kept the machine's cores busy, the same work on two workers cannot take less
than that share of its time (the printed floor).

A worker uses every core it may run on (ninja's jobs, the test step's processes), so on a
machine with as many cores as the largest worker count one worker already fills it and a
second only contends. ``--pin`` gives each worker process its own share of the cores
(cores // the largest worker count, by CPU affinity), as a deployment gives each worker
its own machine or cgroup: the ratio then says how a matrix spreads over workers.

Needs Postgres at 127.0.0.1:5432 (user postgres) and Redis at 127.0.0.1:6379.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
from sqlalchemy import select, text  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from benchmarks.cpu_meter import CpuMeter, CpuUse  # noqa: E402
from service.commands.runs import create_run, get_or_create_backend  # noqa: E402
from service.db import make_engine, session_scope  # noqa: E402
from service.dispatch import CeleryDispatcher  # noqa: E402
from service.migrate import upgrade  # noqa: E402
from service.models import Backend, Run, RunState, Step  # noqa: E402
from tests.support.pyonly import write_pyonly_backend  # noqa: E402

POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
REDIS_URL = "redis://127.0.0.1:6379/9"
TARGETS = ["pip:torch==2.13.0", "pip:torch==2.14.1", "installed"]
PYONLY_TESTS = {
    f"test_pyonly_{n}.py": f"import torch\n\n\ndef test_add_{n}():\n"
    f"    assert torch.ones(2).add({n}).sum().item() == 2 * (1 + {n})\n"
    for n in range(4)
}


BACKENDS = ["torch_openreg", "tiny", "pyonly"]


def backends(tmp: Path, names: list[str]) -> dict[str, Path]:
    every = {
        "torch_openreg": lambda: ROOT / "backend",
        "tiny": lambda: ROOT / "tests" / "fixtures" / "backends" / "tiny",
        "pyonly": lambda: write_pyonly_backend(tmp / "pyonly", PYONLY_TESTS),
    }
    return {name: every[name]() for name in names}


def fresh_database() -> str:
    name = f"ootci_matrix_{uuid.uuid4().hex[:8]}"
    admin = make_engine(POSTGRES).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return POSTGRES.rsplit("/", 1)[0] + f"/{name}"


def drop_database(url: str) -> None:
    admin = make_engine(POSTGRES).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)'))
    admin.dispose()


def start_workers(
    count: int, env: dict[str, str], logs: Path, cores: list[set[int]] | None = None
) -> list[subprocess.Popen[bytes]]:
    procs = []
    for n in range(count):
        log = (logs / f"worker-{n}.log").open("wb")
        mine = cores[n] if cores else None
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker",
             "--pool=prefork", "-c", "1", "-Q", "ootci", "-n", f"matrix{n}@%h",
             "--loglevel=INFO", "--without-gossip", "--without-mingle", "--without-heartbeat"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=(lambda mine=mine: os.sched_setaffinity(0, mine)) if mine else None,
        ))
    deadline = time.monotonic() + 120
    while not all(b"ready" in (logs / f"worker-{n}.log").read_bytes() for n in range(count)):
        if time.monotonic() > deadline:
            sys.exit(f"workers not ready; see {logs}")
        time.sleep(0.5)
    return procs


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def du_bytes(*paths: Path) -> int:
    """Disk used by ``paths`` together (du counts a hard-linked file once per call)."""
    if not paths:
        return 0
    out = subprocess.run(["du", "-scB1", *map(str, paths)], capture_output=True, text=True)
    return int(out.stdout.splitlines()[-1].split()[0]) if out.stdout else 0


def core_shares(workers: int, largest: int) -> list[set[int]]:
    """``workers`` disjoint sets of cores, each the size one of ``largest`` workers gets."""
    available = sorted(os.sched_getaffinity(0))
    each = max(1, len(available) // largest)
    return [set(available[n * each:(n + 1) * each]) or {available[-1]} for n in range(workers)]


def one_matrix(
    workers: int, targets: list[str], backend_names: list[str], tmp: Path,
    cores: list[set[int]] | None = None,
) -> dict[str, object]:
    home = tmp / f"home-{workers}"
    logs = tmp / f"logs-{workers}"
    logs.mkdir(parents=True)
    db_url = fresh_database()
    broker = redis.Redis.from_url(REDIS_URL)
    broker.flushdb()
    engine = make_engine(db_url)
    upgrade(engine)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    env.update({
        "OOTCI_HOME": str(home), "OOTCI_DATABASE_URL": db_url, "OOTCI_BROKER_URL": REDIS_URL,
        "PYTHONUNBUFFERED": "1",
    })
    procs = start_workers(workers, env, logs, cores)
    try:
        with session_scope(engine) as s:
            run_ids = []
            for name, source in backends(tmp / f"src-{workers}", backend_names).items():
                backend = get_or_create_backend(s, name, str(source))
                run_ids += [create_run(s, backend, t, trigger="benchmark").id for t in targets]
        load_before = os.getloadavg()[0]
        start = time.monotonic()
        with CpuMeter() as meter:
            dispatcher = CeleryDispatcher(REDIS_URL)
            for run_id in run_ids:
                dispatcher.enqueue_run(run_id)
            dispatcher.close()
            wait_for_verdicts(engine, run_ids, start, logs)
        wall = time.monotonic() - start
        load_after = os.getloadavg()[0]
        return {"wall": wall, "load": (load_before, load_after), "cpu": meter.use,
                **_facts(engine, run_ids, home)}
    finally:
        stop(procs)
        engine.dispose()
        broker.flushdb()
        broker.close()
        drop_database(db_url)


def wait_for_verdicts(engine: object, run_ids: list[int], start: float, logs: Path) -> None:
    while True:
        with Session(engine) as s:  # type: ignore[arg-type]
            states = list(s.scalars(select(Run.state).where(Run.id.in_(run_ids))))
        if all(RunState(state).finished for state in states):
            return
        if time.monotonic() - start > 4 * 3600:
            sys.exit(f"the matrix did not finish in 4 h; see {logs}")
        time.sleep(1)


def _facts(engine: object, run_ids: list[int], home: Path) -> dict[str, object]:
    step_s: dict[str, float] = defaultdict(float)
    hits = 0
    verdicts: Counter[str] = Counter()
    rows = []
    with Session(engine) as s:  # type: ignore[arg-type]
        for run in s.scalars(select(Run).where(Run.id.in_(run_ids)).order_by(Run.id)):
            backend_name = s.get_one(Backend, run.backend_id).name
            verdicts[run.state] += 1
            steps = list(s.scalars(select(Step).where(Step.run_id == run.id)))
            for step in steps:
                step_s[step.name] += step.duration_s or 0.0
                if step.name == "provision" and b"ootci: reusing" in step.read_log():
                    hits += 1
            rows.append((run.id, backend_name, run.torch_spec, run.state, run.error or ""))
    envs = sorted(p for p in (home / "cache" / "envs").glob("*") if p.is_dir())
    return {
        "step_s": dict(step_s), "provision_hits": hits, "verdicts": dict(verdicts),
        "runs": rows,
        "env_bytes": {p.name: du_bytes(p) for p in envs},
        "envs_together": du_bytes(*envs),
    }


def report(workers: int, result: dict[str, object]) -> None:
    wall = float(result["wall"])  # type: ignore[arg-type]
    step_s: dict[str, float] = result["step_s"]  # type: ignore[assignment]
    total = sum(step_s.values()) or 1.0
    load = result["load"]
    print(f"\n== {workers} worker process(es): {wall:.0f} s to the last verdict "
          f"(load 1 min before/after: {load[0]:.2f}/{load[1]:.2f})")  # type: ignore[index]
    cpu: CpuUse = result["cpu"]  # type: ignore[assignment]
    print(f"   cores: {cpu.line()}")
    print("   step share of summed step time: " + ", ".join(
        f"{name} {sec:.0f} s ({100 * sec / total:.0f}%)" for name, sec in sorted(step_s.items())))
    runs = len(result["runs"])  # type: ignore[arg-type]
    print(f"   provisions that reused a cached env: {result['provision_hits']} of {runs}")
    env_bytes: dict[str, int] = result["env_bytes"]  # type: ignore[assignment]
    for name, size in env_bytes.items():
        print(f"   env {name}: {size / 1e6:.0f} MB alone")
    print(f"   all envs together: {int(result['envs_together']) / 1e6:.0f} MB")  # type: ignore[call-overload]
    print(f"   verdicts: {result['verdicts']}")
    for run_id, _name, spec, state, error in result["runs"]:  # type: ignore[attr-defined]
        print(f"     run {run_id} {_name} x {spec}: {state} {error[:160]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--targets", nargs="+", default=TARGETS)
    parser.add_argument("--backends", nargs="+", default=BACKENDS, choices=BACKENDS)
    parser.add_argument("--pin", action="store_true",
                        help="each worker on its own share of the cores (CPU affinity)")
    parser.add_argument("--keep", action="store_true", help="keep the homes and logs")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ootci-matrix-"))
    walls = {}
    busy_share = {}  # of the cores, per worker count
    try:
        for count in args.workers:
            cores = core_shares(count, max(args.workers)) if args.pin else None
            result = one_matrix(count, args.targets, args.backends, tmp, cores)
            walls[count] = float(result["wall"])  # type: ignore[arg-type]
            busy_share[count] = result["cpu"].busy_share  # type: ignore[attr-defined]
            if cores:
                print(f"\n(pinned: worker cores {[sorted(c) for c in cores]})")
            report(count, result)
    finally:
        if args.keep:
            print(f"\nkept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if 1 in walls and 2 in walls:
        print(f"\nratio two workers / one: {walls[2] / walls[1]:.2f}  (target <= 0.6; "
              f"floor on this machine {busy_share[1]:.2f}: one worker kept that share of the cores busy)")


if __name__ == "__main__":
    main()
