"""Peak memory of the API process under 8 concurrent views of one 200 MB stored step log.

Seeds a throw-away database (Postgres by default, or SQLite) with a finished run whose
build step stored a 200 MB compiler-like log (zlib, about 10x), starts the real app under
uvicorn in a child process, then has 8 HTTP clients at once read the log's last page
(the dashboard, which reads the whole log to find it) and then download it whole
(``/api/runs/<id>/steps/build/log``). Prints the process's VmHWM (peak resident memory)
before and after each round; the target is <= 300 MB (the API pod's limit is 1 GiB).

    .venv/bin/python benchmarks/log_views.py                  # Postgres, 200 MB, 8 views
    .venv/bin/python benchmarks/log_views.py --sqlite --mb 100

Needs the Postgres server at OOTCI_TEST_POSTGRES_URL (default postgres@127.0.0.1/test)
and Redis at 127.0.0.1:6379 (the app's broker; nothing is queued).
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
    peak_rss_mb,
    start_api,
    store_step_log,
)
from tests.support.processes import Processes  # noqa: E402

TARGET_MB = 300


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="the stored log's size")
    parser.add_argument("--views", type=int, default=8)
    parser.add_argument("--sqlite", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ootci-logviews-"))
    server = os.environ.get("OOTCI_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
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
    run_id = store_step_log(engine, data)
    engine.dispose()
    processes = Processes(tmp / "logs", cwd=ROOT)
    try:
        api = start_api(processes, url, tmp)
        concurrent_views(api.url, [f"/runs/{run_id}/steps/build/log?page=1"])
        base = peak_rss_mb(api.pid)
        print(f"{'sqlite' if args.sqlite else 'postgres'}: {args.mb} MB log, "
              f"{args.views} concurrent views; API VmHWM after warm-up {base:.0f} MB")
        for label, path in (("last page (HTML)", f"/runs/{run_id}/steps/build/log?page=1000000"),
                            ("whole download", f"/api/runs/{run_id}/steps/build/log")):
            started = time.monotonic()
            sizes = concurrent_views(api.url, [path] * args.views)
            took = time.monotonic() - started
            peak = peak_rss_mb(api.pid)
            print(f"  {label:<18} {args.views} x {sizes[0] / 2**20:7.1f} MB answered in "
                  f"{took:5.1f} s; VmHWM {peak:.0f} MB")
        verdict = "OK" if peak <= TARGET_MB else "OVER"
        print(f"peak {peak:.0f} MB, target <= {TARGET_MB} MB: {verdict}")
        return 0 if peak <= TARGET_MB else 1
    finally:
        processes.stop()
        if not args.sqlite:
            admin = make_engine(server).execution_options(isolation_level="AUTOCOMMIT")
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


if __name__ == "__main__":
    sys.exit(main())
