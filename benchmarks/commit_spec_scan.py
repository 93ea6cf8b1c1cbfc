"""How much a ``commit:<sha>`` spec costs to resolve, with and without the commit's date.

A local nightly index of N tiny wheels (one per night); the sha is the oldest night's, the
worst case for the bounded newest-first scan. Prints wall times, wheels opened and the
ratio: the dated search opens a few wheels whatever the index size.

    .venv/bin/python benchmarks/commit_spec_scan.py [nights]
"""

from __future__ import annotations

import datetime as dt
import hashlib
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.fake_torch import NightlyIndex  # noqa: E402
from workers.pipeline.env.resolve import nightly_of_commit  # noqa: E402
from workers.pipeline.logs.sink import LogSink  # noqa: E402


def main(nights: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        index = NightlyIndex(root / "index")
        first = dt.date(2026, 11, 26) - dt.timedelta(days=nights - 1)
        for n in range(nights):
            day = first + dt.timedelta(days=n)
            sha = hashlib.sha1(day.isoformat().encode()).hexdigest()
            index.publish(f"2.14.0.dev{day:%Y%m%d}+cpu", sha, {"x.h": "// " + "x" * 4096})
        target = hashlib.sha1((first + dt.timedelta(days=nights - 10)).isoformat().encode()).hexdigest()
        target_day = first + dt.timedelta(days=nights - 10)
        results = {}
        for label, date, limit in (("newest-first, bounded", None, nights), ("from the commit date", target_day, nights)):
            cache = root / f"cache-{len(results)}"
            started = time.perf_counter()
            with LogSink(root / f"log-{len(results)}") as log:
                nightly_of_commit(index.url, target, cache, log, commit_date=date, limit=limit)
            elapsed = time.perf_counter() - started
            opened = (root / f"log-{len(results)}").read_text().count(" was built from ")
            results[label] = (elapsed, opened)
            print(f"{label:24s} {elapsed * 1000:8.1f} ms  {opened:3d} wheels opened")
        (a, na), (b, nb) = results.values()
        print(f"ratio (bounded scan / dated search): {a / b:.1f}x time, {na / max(nb, 1):.1f}x wheels")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
