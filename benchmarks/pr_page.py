"""How the PR page's and the identifier search's queries scale with the number of runs.

Seeds two throw-away Postgres databases (``--small`` and ``--large`` runs, 5% of them PR
runs, one breakage with a ranking per 20 runs), then times, in one process and one run,
the reads ``/prs/{n}`` and ``/search`` make (``service/queries/prs.py``,
``service/queries/search_ids.py``): the median of ``--reps`` calls each. Prints each
median and the ratio large/small: a ratio near 1 is an indexed read, near large/small a
scan of the runs.

    .venv/bin/python benchmarks/pr_page.py                       # 2k vs 20k runs
    .venv/bin/python benchmarks/pr_page.py --small 1000 --large 5000 --reps 10

Needs the Postgres server at OOTCI_TEST_POSTGRES_URL (default postgres@127.0.0.1/test).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import Session

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from service.db import make_engine  # noqa: E402
from service.migrate import upgrade  # noqa: E402
from service.models import Backend  # noqa: E402
from service.queries.prs import pr_view  # noqa: E402
from service.queries.search_ids import find_ids  # noqa: E402

SERVER = os.environ.get("OOTCI_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
BACKENDS = 4


def _sha(i: int, salt: str) -> str:
    return (uuid.uuid5(uuid.NAMESPACE_OID, f"{salt}{i}").hex * 2)[:40]


def seed(engine: Engine, runs: int) -> tuple[int, str, str]:
    """``runs`` runs; returns (a PR with runs and a suspicion, its head sha, a nightly version)."""
    tables = Backend.metadata.tables
    nights = max(1, runs // BACKENDS)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    with engine.begin() as conn:
        conn.execute(tables["backends"].insert(), [
            {"id": b + 1, "name": f"b{b}", "source": f"/src/b{b}", "recipe": {}, "created_at": start}
            for b in range(BACKENDS)])
        conn.execute(tables["torch_builds"].insert(), [
            {"id": n + 1, "spec": f"nightly:{n}", "source_kind": "nightly",
             "version": f"2.15.0.dev{20260101 + n}", "git_version": _sha(n, "night"), "created_at": start}
            for n in range(nights)])
        rows = []
        for i in range(runs):
            pr = 100_000 + i // BACKENDS if i % 20 < BACKENDS else None
            head = _sha(i // BACKENDS, "head")
            rows.append({
                "id": i + 1, "backend_id": i % BACKENDS + 1, "torch_spec": "nightly",
                "torch_build_id": i // BACKENDS % nights + 1, "state": "passed", "trigger": "nightly",
                "trigger_info": {"pr": pr, "sha": head} if pr else {},
                "dedupe_key": f"pr:{pr}:{head}:{i % BACKENDS + 1}" if pr else None,
                "created_at": start + dt.timedelta(minutes=i), "attempts": 1})
        conn.execute(tables["runs"].insert(), rows)
        conn.execute(tables["breakages"].insert(), [
            {"id": k + 1, "backend_id": k % BACKENDS + 1, "fingerprint": f"fp{k}",
             "fingerprint_version": 1, "category": "upstream", "subtype": "signature-changed",
             "title": f"signature-changed: sym{k}", "captures": {}, "status": "open",
             "first_seen_at": start, "last_seen_at": start, "occurrences": 1,
             "range_head_sha": _sha(k, "night"),
             "culprits": [{"sha": _sha(k, "merged"), "pr": 100_000 + k, "title": "t", "score": 0.8,
                           "reasons": ["r"]}]}
            for k in range(runs // 20)])
        for table in ("backends", "torch_builds", "runs", "breakages"):
            conn.execute(text(f"SELECT setval('{table}_id_seq', (SELECT max(id) FROM {table}))"))
        conn.execute(text("ANALYZE"))
    # A PR that has runs: run i is a PR run when i % 20 < BACKENDS.
    i = (runs // 2) // 20 * 20
    pr, head = 100_000 + i // BACKENDS, _sha(i // BACKENDS, "head")
    return pr, head, f"2.15.0.dev{20260101 + nights // 2}"


def median_ms(reps: int, call: Callable[[], object]) -> float:
    call()  # warm the caches and the plans
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        call()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def measure(runs: int, reps: int) -> dict[str, float]:
    name = f"ootci_bench_pr_{uuid.uuid4().hex[:8]}"
    admin = make_engine(SERVER).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(SERVER).set(database=name).render_as_string(hide_password=False)
    engine = make_engine(url)
    try:
        upgrade(engine)
        pr, head, version = seed(engine, runs)
        with Session(engine) as s:
            view = pr_view(s, pr)
            assert view is not None and view.runs, f"seeded PR {pr} has no runs"
            return {
                "pr page": median_ms(reps, lambda: pr_view(s, pr)),
                "search #pr": median_ms(reps, lambda: find_ids(s, f"#{pr}")),
                "search sha prefix": median_ms(reps, lambda: find_ids(s, head[:9])),
                "search version": median_ms(reps, lambda: find_ids(s, version)),
            }
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=2000)
    parser.add_argument("--large", type=int, default=20000)
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    small, large = measure(args.small, args.reps), measure(args.large, args.reps)
    print(f"{'read':<20} {args.small:>8} runs {args.large:>8} runs   ratio (x{args.large / args.small:.0f} runs)")
    for key in small:
        print(f"{key:<20} {small[key]:>10.2f} ms {large[key]:>10.2f} ms   {large[key] / small[key]:.2f}")


if __name__ == "__main__":
    main()
