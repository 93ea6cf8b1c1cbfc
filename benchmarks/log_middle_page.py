"""What one page in the middle of a 200 MB step log costs the API process: its peak
resident memory (VmHWM) and the CPU time it spends, for an ended step's stored log and a
running step's streamed chunks, with N concurrent views of the same page.

A page is read from the nearest seek point before it (``steps.log_index`` for a stored
log, ``log_chunks.newlines`` for a streamed one: issue #33), so its cost should follow the
page, not its offset. ``--unindexed`` stores the log as before the index and the counts
(read through from the start), for the comparison.

    .venv/bin/python benchmarks/log_middle_page.py              # Postgres, 200 MB, 8 views
    .venv/bin/python benchmarks/log_middle_page.py --sqlite --views 1
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from service.db import make_engine  # noqa: E402
from service.migrate import upgrade  # noqa: E402
from tests.support.log_views import (  # noqa: E402
    build_log,
    concurrent_views,
    cpu_seconds,
    peak_rss_mb,
    start_api,
    store_step_log,
    stream_step_log,
)
from tests.support.processes import Processes  # noqa: E402

LINES_PER_PAGE = 500


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="the log's size")
    parser.add_argument("--views", type=int, default=8)
    parser.add_argument("--sqlite", action="store_true")
    parser.add_argument("--unindexed", action="store_true",
                        help="store the log as before its count and index")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ootci-midpage-"))
    server = os.environ.get("OOTCI_TEST_POSTGRES_URL",
                            "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    name = f"ootci_b_{uuid.uuid4().hex[:10]}"
    if args.sqlite:
        url = f"sqlite:///{tmp / 'ootci.db'}"
    else:
        admin = make_engine(server).execution_options(isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        url = server.rsplit("/", 1)[0] + f"/{name}"
    engine = make_engine(url)
    upgrade(engine)
    data = build_log(args.mb << 20)
    pages = -(-data.count(b"\n") // LINES_PER_PAGE)
    runs = {"stored": store_step_log(engine, data, as_stored_now=not args.unindexed)}
    if not args.unindexed:
        runs["streamed"] = stream_step_log(engine, data)
    engine.dispose()
    del data
    processes = Processes(tmp / "logs", cwd=ROOT)
    try:
        api = start_api(processes, url, tmp)
        concurrent_views(api.url, ["/healthz"])
        print(f"{'sqlite' if args.sqlite else 'postgres'}: {args.mb} MB log, {pages} pages, "
              f"{args.views} concurrent views; API VmHWM at start {peak_rss_mb(api.pid):.0f} MB")
        for label, run_id in runs.items():
            for page in (pages // 2, 2):
                path = f"/runs/{run_id}/steps/build/log?page={page}"
                base, cpu, started = peak_rss_mb(api.pid), cpu_seconds(api.pid), time.monotonic()
                concurrent_views(api.url, [path] * args.views)
                print(f"  {label:<8} page {page:>5}: {time.monotonic() - started:6.2f} s, "
                      f"API CPU {cpu_seconds(api.pid) - cpu:6.2f} s, "
                      f"VmHWM {base:.0f} -> {peak_rss_mb(api.pid):.0f} MB")
        return 0
    finally:
        processes.stop()
        if not args.sqlite:
            admin = make_engine(server).execution_options(isolation_level="AUTOCOMMIT")
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


if __name__ == "__main__":
    sys.exit(main())
