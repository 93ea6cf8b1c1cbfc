"""Eight concurrent views of a big stored step log cost the API process memory bounded by
the pieces it reads, not by the log: a real uvicorn process, eight real HTTP clients, its
peak resident memory from /proc (VmHWM). The full 200 MB measurement is
benchmarks/log_views.py; here a 96 MB log, whose old cost (the whole log and its lines
per view) was several times the bound (889 MB for 8 views of a 48 MB log)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from tests.support.log_views import (
    build_log,
    concurrent_views,
    peak_rss_mb,
    start_api,
    store_step_log,
)
from tests.support.processes import Processes

LOG_MB = 96
VIEWS = 8


def test_eight_views_of_a_big_log_hold_pieces_not_the_log(engine: Engine, tmp_path: Path) -> None:
    data = build_log(LOG_MB << 20)
    run_id = store_step_log(engine, data)
    processes = Processes(tmp_path / "logs")
    try:
        api = start_api(processes, engine.url.render_as_string(hide_password=False), tmp_path)
        # Warm up every code path once (templates, queries), so the peak is the views'.
        concurrent_views(api.url, [f"/runs/{run_id}/steps/build/log?page=1",
                                   f"/api/runs/{run_id}/steps/build/log?tail=5"])
        before = peak_rss_mb(api.pid)
        pages = concurrent_views(api.url, [f"/runs/{run_id}/steps/build/log?page=1000000"] * VIEWS)
        downloads = concurrent_views(api.url, [f"/api/runs/{run_id}/steps/build/log"] * VIEWS)
        peak = peak_rss_mb(api.pid)
    finally:
        processes.stop()
    assert downloads == [len(data)] * VIEWS
    assert all(size > 10_000 for size in pages)  # the last page, rendered
    # One view holding the log would add LOG_MB; eight hold a few MB of pieces each.
    print(f"VmHWM {before:.0f} MB -> {peak:.0f} MB for {VIEWS} pages and {VIEWS} downloads")
    assert peak - before < LOG_MB, (before, peak)
    assert peak < 300, (before, peak)
