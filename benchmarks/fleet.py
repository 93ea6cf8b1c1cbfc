"""Runs finished per minute by a fleet of 1 and of 2 Celery worker processes.

Each worker is its own process with its own work dir (as separate machines would have),
one run at a time (`-c 1`, as deployed), all on one Postgres and one Redis. RUNS runs of
the pyonly backend (nothing to compile; a suite of a few tests that sleep, standing in
for a device's test time) are queued at once; the clock runs from the queueing to the
last verdict. The ratio 2-worker / 1-worker throughput is the scaling; on an idle
machine with a core per worker it approaches 2 while the runs' time is spent in their
tests rather than in the database.

    python benchmarks/fleet.py [--runs 8] [--redis-db 11]

Needs Postgres (OOTCI_TEST_POSTGRES_URL, default postgres@127.0.0.1:5432) and Redis.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import redis
from sqlalchemy import func, select, text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service.commands.runs import create_run, get_or_create_backend  # noqa: E402
from service.db import make_engine, session_scope  # noqa: E402
from service.dispatch import CeleryDispatcher  # noqa: E402
from service.migrate import upgrade  # noqa: E402
from service.models import Run, RunState  # noqa: E402
from tests.support.pyonly import write_pyonly_backend  # noqa: E402

SUITE = "".join(
    f"import time\n\n\ndef test_{i}():\n    time.sleep(1.0)\n\n\n" for i in range(3)
)
POSTGRES = os.environ.get(
    "OOTCI_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def fleet(workers: int, runs: int, db_url: str, broker: str, tmp: Path, backend: Path) -> float:
    """Runs per minute with ``workers`` worker processes."""
    engine = make_engine(db_url)
    env = {
        "PATH": os.environ["PATH"],
        "OOTCI_DATABASE_URL": db_url,
        "OOTCI_BROKER_URL": broker,
        "OOTCI_DEFAULT_TORCH": "installed",
        "OOTCI_RERUN_FAILED_TESTS": "false",
        "PYTHONUNBUFFERED": "1",
    }
    procs = []
    for n in range(workers):
        home = tmp / f"fleet{workers}-worker{n}"
        log = (tmp / f"fleet{workers}-worker{n}.log").open("wb")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker",
             "--pool=prefork", "-c", "1", "-Q", "ootci", "-n", f"w{n}-{uuid.uuid4().hex[:6]}@%h",
             "--without-gossip", "--without-mingle", "--without-heartbeat"],
            cwd=ROOT, env={**env, "OOTCI_HOME": str(home)}, stdout=log, stderr=subprocess.STDOUT,
        ))
    try:
        time.sleep(8)  # the workers connect before the clock starts
        dispatcher = CeleryDispatcher(broker)
        with session_scope(engine) as s:
            be = get_or_create_backend(s, "pyonly", str(backend))
            ids = [create_run(s, be, "installed", trigger="api").id for _ in range(runs)]
        start = time.perf_counter()
        for run_id in ids:
            dispatcher.enqueue_run(run_id)
        while True:
            with session_scope(engine) as s:
                done = s.scalar(select(func.count()).select_from(Run).where(
                    Run.id.in_(ids), Run.state.in_([st.value for st in RunState if st.finished])))
                failed = s.scalar(select(func.count()).select_from(Run).where(
                    Run.id.in_(ids), Run.state != RunState.PASSED,
                    Run.state.in_([st.value for st in RunState if st.finished])))
            if done == runs:
                break
            if time.perf_counter() - start > 1800:
                sys.exit("fleet: runs did not finish within 30 minutes")
            time.sleep(0.5)
        elapsed = time.perf_counter() - start
        if failed:
            sys.exit(f"fleet: {failed} of the runs did not pass (see {tmp})")
        return runs / elapsed * 60
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(60)
        engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--redis-db", type=int, default=11)
    args = parser.parse_args()
    broker = f"redis://127.0.0.1:6379/{args.redis_db}"
    redis.Redis.from_url(broker).flushdb()
    name = f"ootci_fleet_{os.getpid()}"
    admin = make_engine(POSTGRES).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    db_url = POSTGRES.rsplit("/", 1)[0] + f"/{name}"
    try:
        with tempfile.TemporaryDirectory(prefix="ootci-fleet-") as tmp_dir:
            tmp = Path(tmp_dir)
            backend = write_pyonly_backend(tmp / "pyonly", {"test_sleepy.py": SUITE})
            engine = make_engine(db_url)
            upgrade(engine)
            engine.dispose()
            rates = {}
            for workers in (1, 2):
                rates[workers] = fleet(workers, args.runs, db_url, broker, tmp, backend)
                print(f"{workers} worker process(es): {rates[workers]:.1f} runs/min "
                      f"({args.runs} runs)", flush=True)
            print(f"scaling 2/1: {rates[2] / rates[1]:.2f}x")
    finally:
        redis.Redis.from_url(broker).flushdb()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


if __name__ == "__main__":
    main()
