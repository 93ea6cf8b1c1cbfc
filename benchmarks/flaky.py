"""What issue #30's reads and checks cost on a big database: the /flaky list (every
backend's last N runs), the per-run flakiness the collect step computes for a run's
failing tests, and a named token's lookup (every authenticated write pays it once).

Seeds a throw-away Postgres database like ``dashboard.py`` (``tests.support.seed``) and
times the functions directly, one call at a time; prints p50/p95 in ms.

    .venv/bin/python benchmarks/flaky.py                  # 10k runs
    .venv/bin/python benchmarks/flaky.py --runs 2000 --repeat 50

Needs the Postgres server at OOTCI_TEST_POSTGRES_URL (default postgres@127.0.0.1/test).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import select, text
from sqlalchemy.orm import Session

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from service.api.auth import authenticate  # noqa: E402
from service.commands.tokens import add_token  # noqa: E402
from service.config import Settings  # noqa: E402
from service.db import make_engine, session_scope  # noqa: E402
from service.migrate import upgrade  # noqa: E402
from service.models import Backend, Run, TestResult  # noqa: E402
from service.queries import flaky  # noqa: E402
from tests.support.seed import SeedSpec, seed_database  # noqa: E402

DEFAULT_SERVER = os.environ.get(
    "OOTCI_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    fn()  # warm the caches once
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[max(0, round(0.95 * (len(times) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=DEFAULT_SERVER)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=100)
    parser.add_argument("--window", type=int, default=20)
    args = parser.parse_args()
    name = f"ootci_bench_{uuid.uuid4().hex[:10]}"
    admin = make_engine(args.server).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = args.server.rsplit("/", 1)[0] + f"/{name}"
    try:
        engine = make_engine(url)
        upgrade(engine)
        counts = seed_database(engine, SeedSpec(nights=-(-args.runs // 9)))
        print(f"seeded {counts['runs']} runs, {counts['test_results']} test results")
        with session_scope(engine) as s:
            for i in range(200):  # a deployment's worth of named tokens
                add_token(s, f"user{i}", "triager", actor="bench")
            secret = add_token(s, "me", "triager", actor="bench").secret
        settings = Settings(database_url=url)
        with Session(engine) as s:
            backend_id = s.scalars(select(Backend.id)).first()
            assert backend_id is not None
            newest = s.scalars(select(Run.id).where(Run.backend_id == backend_id)
                               .order_by(Run.id.desc())).first()
            assert newest is not None
            failing = list(s.scalars(select(TestResult.nodeid).distinct().limit(50)))
            rows = flaky.flaky_tests(s, args.window)
            print(f"/flaky lists {len(rows)} tests over {args.window} runs per backend")
            cases: dict[str, Callable[[], object]] = {
                "flaky list (all backends)": lambda: flaky.flaky_tests(s, args.window),
                "collect: flakiness of 50 tests": lambda: flaky.stats(
                    s, flaky.window(s, backend_id, args.window, upto=newest), failing),
                "bearer token lookup": lambda: authenticate(settings, engine, secret),
            }
            for label, fn in cases.items():
                p50, p95 = timed(fn, args.repeat)
                print(f"{label:34s} p50 {p50:7.2f} ms  p95 {p95:7.2f} ms")
        engine.dispose()
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
