"""Dashboard latency with 10k runs and ~1M test results in Postgres.

Creates a throw-away Postgres database, seeds it (``tests.support.seed``: COPY for the big
tables), serves the real app with uvicorn in a child process, and times pages with a real
HTTP client (httpx, keep-alive, one request at a time). Prints p50/p95/p99 per page and
the p95 of the matrix and run pages against the 150 ms target.

    .venv/bin/python benchmarks/dashboard.py                 # 10k runs, 200 requests/page
    .venv/bin/python benchmarks/dashboard.py --runs 2000 --requests 50   # a quick look
    .venv/bin/python benchmarks/dashboard.py --keep          # keep the database afterwards

Needs the Postgres server at OOTCI_TEST_POSTGRES_URL (default postgres@127.0.0.1/test).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import httpx
from sqlalchemy import func, select, text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from service.db import make_engine  # noqa: E402
from service.migrate import upgrade  # noqa: E402
from service.models import Breakage, Failure, Run, TestResult  # noqa: E402
from tests.support.live_server import free_port  # noqa: E402
from tests.support.seed import SeedSpec, seed_database  # noqa: E402

TARGET_P95_MS = 150.0
DEFAULT_SERVER = os.environ.get(
    "OOTCI_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


class _NoDispatch:
    def enqueue_run(self, run_id: int) -> None:
        raise RuntimeError("the benchmark never enqueues")

    def check(self) -> None:
        return None

    def close(self) -> None:
        return None


def serve(database_url: str, port: int) -> None:
    """The child process: the real app over the benchmark database."""
    import uvicorn

    from service.api.app import create_app
    from service.config import Settings

    settings = Settings(database_url=database_url, home=Path("/tmp/ootci-bench-home"))
    engine = make_engine(database_url)
    app = create_app(settings, dispatcher=_NoDispatch(), engine=engine)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def _cpu_ms(pid: int) -> float:
    """CPU time (user + system) the server process has used so far. Unlike latency it does
    not grow when other work shares the cores, so it is the number to compare across runs
    on a busy machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def _time(client: httpx.Client, paths: list[str], requests: int) -> tuple[list[float], int]:
    times: list[float] = []
    size = 0
    for i in range(requests):
        path = paths[i % len(paths)]
        start = time.perf_counter()
        r = client.get(path)
        elapsed = (time.perf_counter() - start) * 1000
        if r.status_code != 200:
            raise RuntimeError(f"GET {path} -> {r.status_code}: {r.text[:300]}")
        times.append(elapsed)
        size = max(size, len(r.content))
    return times, size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=DEFAULT_SERVER, help="Postgres URL to create the db on")
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=200, help="timed requests per page")
    parser.add_argument("--keep", action="store_true", help="do not drop the database")
    parser.add_argument("--serve", metavar="DATABASE_URL", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return 0

    name = f"ootci_bench_{uuid.uuid4().hex[:10]}"
    admin = make_engine(args.server).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = args.server.rsplit("/", 1)[0] + f"/{name}"
    server: subprocess.Popen[bytes] | None = None
    try:
        engine = make_engine(url)
        upgrade(engine)
        spec = SeedSpec(nights=-(-args.runs // 9), backends=("openreg", "acme_npu", "zeta_xpu"),
                        pins=("2.12.0", "2.13.0"))
        start = time.perf_counter()
        counts = seed_database(engine, spec)
        seed_s = time.perf_counter() - start
        print(f"seeded {counts['runs']} runs, {counts['test_results']} test results, "
              f"{counts['failures']} failures, {counts['breakages']} breakages, "
              f"{counts['torch_builds']} torch builds in {seed_s:.1f} s (database {name})")

        rng = random.Random(6)
        with engine.connect() as conn:
            max_run = conn.execute(select(func.max(Run.id))).scalar_one()
            failed_runs = list(conn.execute(
                select(Failure.run_id).distinct().order_by(Failure.run_id.desc()).limit(200)
            ).scalars())
            breakage = conn.execute(
                select(Breakage.id).order_by(Breakage.occurrences.desc()).limit(1)
            ).scalar_one()
            nodeid = conn.execute(
                select(TestResult.nodeid).where(TestResult.outcome == "failed").limit(1)
            ).scalar_one()
        # Run pages: failed ones (evidence, groups) and any run, across the whole history.
        run_paths = [f"/runs/{rid}" for rid in rng.sample(failed_runs, min(50, len(failed_runs)))]
        run_paths += [f"/runs/{rng.randint(1, max_run)}" for _ in range(50)]
        rng.shuffle(run_paths)
        engine.dispose()

        port = free_port()
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve", url, "--port", str(port)], cwd=ROOT)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        with httpx.Client(base_url=base, timeout=30) as client:
            while True:
                try:
                    if client.get("/static/ootci.css").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the server did not start")
                time.sleep(0.2)

            pages: list[tuple[str, list[str], bool]] = [
                ("matrix /", ["/"], True),
                ("run /runs/{id}", run_paths, True),
                ("matrix page 5", ["/?page=5"], False),
                ("matrix one backend, changed", ["/?backend=acme_npu&changed=true"], False),
                ("run status.json", [f"/runs/{max_run}/status.json"], False),
                ("breakages", ["/breakages"], False),
                ("breakage detail", [f"/breakages/{breakage}"], False),
                ("test history", [f"/tests?nodeid={quote(nodeid)}"], False),
                ("search", ["/search?q=deviceCount", "/search?q=undefined%20symbol"], False),
                ("trends", ["/trends"], False),
            ]
            for _label, paths, _gated in pages:  # warm caches, compile templates
                _time(client, paths, min(10, len(paths)) or 1)

            print(f"\nload average before timing: {os.getloadavg()[0]:.1f} on "
                  f"{os.cpu_count()} cores")
            print(f"\n{'page':34} {'n':>5} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
                  f"{'max ms':>8} {'cpu ms':>7} {'KiB':>7}")
            verdicts = []
            for label, paths, gated in pages:
                n = args.requests if gated else max(20, args.requests // 4)
                cpu_before = _cpu_ms(server.pid)
                times, size = _time(client, paths, n)
                cpu = (_cpu_ms(server.pid) - cpu_before) / n
                p95 = _percentile(times, 95)
                print(f"{label:34} {n:>5} {statistics.median(times):>8.1f} {p95:>8.1f} "
                      f"{_percentile(times, 99):>8.1f} {max(times):>8.1f} {cpu:>7.1f} "
                      f"{size / 1024:>7.1f}")
                if gated:
                    verdicts.append((label, p95))
        print(f"\nload average after timing: {os.getloadavg()[0]:.1f}; 'cpu ms' is the server "
              "process's CPU time per request\n")
        ok = True
        for label, p95 in verdicts:
            ratio = p95 / TARGET_P95_MS
            status = "OK" if ratio <= 1 else "OVER"
            ok &= ratio <= 1
            print(f"{label}: p95 {p95:.1f} ms = {ratio:.2f} x the {TARGET_P95_MS:.0f} ms target "
                  f"[{status}]")
        return 0 if ok else 1
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
        if not args.keep:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


if __name__ == "__main__":
    raise SystemExit(main())
