"""Eight concurrent views of a page in the middle of a big step log cost the API process
memory and CPU in proportion to the page, not to where it lies in the log (issue #33):
the stored log is inflated from the flush point before the page, the streamed one read
from the chunk holding it. A real uvicorn process, eight real HTTP clients, its peak
resident memory (VmHWM) and CPU time from /proc. Before the seek, eight views of the
middle page of a 200 MB log took 27-32 s of the API's CPU (it inflated or fetched the log
up to the page, then on to the end to count the pages), and the streamed log's reached
243 MB (benchmarks/log_middle_page.py)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from tests.support.log_views import (
    build_log,
    concurrent_views,
    cpu_seconds,
    peak_rss_mb,
    start_api,
    store_step_log,
    stream_step_log,
)
from tests.support.processes import Processes

LOG_MB = 96
VIEWS = 8
LINES_PER_PAGE = 500


def test_eight_views_of_a_middle_page_cost_the_page_not_its_offset(
    engine: Engine, tmp_path: Path,
) -> None:
    data = build_log(LOG_MB << 20)
    middle = data.count(b"\n") // LINES_PER_PAGE // 2
    runs = {"stored": store_step_log(engine, data, as_stored_now=True),
            "streamed": stream_step_log(engine, data)}
    processes = Processes(tmp_path / "logs")
    try:
        api = start_api(processes, engine.url.render_as_string(hide_password=False), tmp_path)
        # Warm up every code path once (templates, queries) on the first page.
        concurrent_views(api.url, [f"/runs/{r}/steps/build/log?page=1" for r in runs.values()])
        for label, run_id in runs.items():
            before, cpu = peak_rss_mb(api.pid), cpu_seconds(api.pid)
            pages = concurrent_views(api.url, [f"/runs/{run_id}/steps/build/log?page={middle}"]
                                     * VIEWS)
            spent, peak = cpu_seconds(api.pid) - cpu, peak_rss_mb(api.pid)
            print(f"{label}: page {middle}: API CPU {spent:.2f} s, "
                  f"VmHWM {before:.0f} -> {peak:.0f} MB")
            assert all(size > 10_000 for size in pages)  # the page, rendered
            # Reading up to the page would inflate or fetch ~48 MB per view: seconds of CPU
            # each, and the chunks in hand; a seek reads a MiB or two.
            assert spent < 4, (label, spent)
            assert peak - before < 48, (label, before, peak)
            assert peak < 300, (label, peak)
    finally:
        processes.stop()
