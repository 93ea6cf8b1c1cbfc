"""The fleet's clock (issue #31 item 4): a new night on the nightly index, to the culprit
PR's label, timed end to end.

Ten registered backends (eight pure-Python, two small C++ fixtures that compile against
the night's headers, one of which the new night breaks) x two targets (a pinned night and
``nightly``) on two Celery worker processes (``-c 1`` each, own work dirs) and Celery beat,
on a private Postgres database and a private Redis db, reporting to the loopback fake
GitHub. Night 1 is published and its matrix run first (green, untimed: the history every
regression range needs); then night 2, the breaking one, is published and the clock
starts. Beat's nightly cron fires every minute here (production: once a night), so
"detected" is bounded by a minute, not by publication.

The timeline (seconds after publication): night detected (the first run of the night
created), first run claimed, each verdict, the breakage opened, culprit ranked, its
verification done, the label posted (seen on the fake GitHub). Then the two ratios:
(label - breaking verdict) against the 5-minute target, and the last verdict against the
CPU floor (total CPU work / cores, benchmarks/cpu_meter.py) with the 1.2x target.

    python benchmarks/nightly_slo.py [--redis-db 12]

Needs Postgres (OOTCI_TEST_POSTGRES_URL, default postgres@127.0.0.1:5432), Redis and c++.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from sqlalchemy import select, text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.cpu_meter import CpuMeter  # noqa: E402
from evals.paths import CULPRIT_CASES  # noqa: E402
from service.commands.backends import add_backend  # noqa: E402
from service.db import make_engine, session_scope  # noqa: E402
from service.domain.verification import unified_patch  # noqa: E402
from service.migrate import upgrade  # noqa: E402
from service.models import Backend, Breakage, CulpritVerification, Run, Step  # noqa: E402
from tests.support.fake_github import FakeGitHub  # noqa: E402
from tests.support.fake_torch import NightlyIndex  # noqa: E402
from tests.support.header_backend import ALLOCATOR_H, ALLOCATOR_H_CONST, write_header_backend  # noqa: E402
from tests.support.processes import Processes, celery_worker  # noqa: E402
from tests.support.pyonly import write_pyonly_backend  # noqa: E402

POSTGRES = os.environ.get(
    "OOTCI_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
REPO = "pytorch/pytorch"
HEADER = "c10/core/Allocator.h"
CASE = CULPRIT_CASES / "allocate-const.json"  # its hidden culprit: #120969, allocate made const
TARGET_LABEL_S = 300.0
TARGET_FLOOR_RATIO = 1.2
PYONLY = 8
# A few tests that do a little work each, standing in for a device suite's CPU time.
SUITE = "".join(
    f"def test_{i}():\n    assert sum(k * k for k in range(300_000)) > 0\n\n\n" for i in range(4)
)
# A C++ fixture the new night does not break: it includes the header, overrides nothing.
UNAFFECTED_SOURCE = """\
#include <c10/core/Allocator.h>
namespace vendor { inline std::size_t size_of(const c10::DataPtr& p) { return p.size; } }
"""


def _case() -> dict[str, Any]:
    """The corpus case, its culprit's hunk made exact for these wheels' header."""
    case = json.loads(CASE.read_text())
    for f in case["commits"][case["expected"]["sha"]]["files"]:
        if f["filename"] == HEADER:
            f["patch"] = unified_patch(ALLOCATOR_H, ALLOCATOR_H_CONST)
    return dict(case)


def _backends(root: Path) -> dict[str, Path]:
    out = {"hdr_vendor": write_header_backend(root / "hdr_vendor", "hdr_vendor")}
    other = write_header_backend(root / "hdr_other", "hdr_other")
    (other / "csrc" / "allocator.cpp").write_text(UNAFFECTED_SOURCE)
    out["hdr_other"] = other
    for n in range(1, PYONLY + 1):
        out[f"py{n:02d}"] = write_pyonly_backend(root / f"py{n:02d}", {"test_suite.py": SUITE})
    return out


@dataclass
class Night:
    day: dt.date
    version: str


class LabelWatcher(threading.Thread):
    """When the label first shows on the fake GitHub (its request log has no clock)."""

    def __init__(self, github: FakeGitHub) -> None:
        super().__init__(daemon=True)
        self.github = github
        self.seen: float | None = None

    def run(self) -> None:
        while self.seen is None:
            if self.github.labels(REPO, 120969):
                self.seen = time.time()
            time.sleep(0.1)


def _night_runs(engine: Any, night: dt.date) -> list[Run]:
    with session_scope(engine) as s:
        runs = [r for r in s.scalars(select(Run).where(Run.trigger == "nightly"))
                if (r.trigger_info or {}).get("night") == night.isoformat()]
        s.expunge_all()
    return runs


def _all_finished(runs: list[Run], expected: int) -> bool:
    return len(runs) == expected and all(r.finished_at is not None for r in runs)


def _wait(what: str, check: Any, timeout: float, procs: Processes) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.25)
    sys.exit(f"nightly_slo: {what} did not happen within {timeout:.0f} s\n{procs.tail(3000)}")


def main() -> None:  # noqa: PLR0915 - one scenario, told in order
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--redis-db", type=int, default=12)
    parser.add_argument("--keep", action="store_true", help="keep the work dir (logs)")
    args = parser.parse_args()
    broker = f"redis://127.0.0.1:6379/{args.redis_db}"
    redis.Redis.from_url(broker).flushdb()
    name = f"ootci_nightly_slo_{os.getpid()}"
    admin = make_engine(POSTGRES).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    db_url = POSTGRES.rsplit("/", 1)[0] + f"/{name}"
    tmp = Path(tempfile.mkdtemp(prefix="ootci-nightly-slo-"))
    github = FakeGitHub().start()
    procs = Processes(tmp / "logs")
    try:
        _scenario(tmp, db_url, broker, github, procs)
    finally:
        procs.stop()
        github.stop()
        redis.Redis.from_url(broker).flushdb()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
        if not args.keep:
            import shutil
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"(work dir kept: {tmp})")


def _scenario(tmp: Path, db_url: str, broker: str, github: FakeGitHub, procs: Processes) -> None:
    base, head = github.load_compare_case(_case())
    today = dt.datetime.now(dt.UTC).date()
    green = Night(today - dt.timedelta(days=1), f"2.14.0.dev{(today - dt.timedelta(days=1)):%Y%m%d}+cpu")
    red = Night(today, f"2.14.0.dev{today:%Y%m%d}+cpu")
    index = NightlyIndex(tmp / "index")
    index.publish(green.version, base, {HEADER: ALLOCATOR_H})
    engine = make_engine(db_url)
    upgrade(engine)
    backends = _backends(tmp / "vendors")
    with session_scope(engine) as s:
        for backend_name, path in backends.items():
            add_backend(s, backend_name, str(path), changed_by="nightly_slo")
    expected = len(backends) * 2
    # The shell's environment (pip's and uv's index settings) without its OOTCI_ settings.
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")},
        "OOTCI_DATABASE_URL": db_url,
        "OOTCI_BROKER_URL": broker,
        "OOTCI_NIGHTLY_INDEX_URL": index.url,
        # The pinned target is night 1 (what vendors pin), the other the newest nightly.
        "OOTCI_PINS": json.dumps([f"nightly:{green.day.isoformat()}"]),
        "OOTCI_DEFAULT_TORCH": "nightly",
        "OOTCI_GITHUB_API_URL": github.url,
        "OOTCI_GITHUB_TOKEN": github.token,
        "OOTCI_PUBLIC_URL": "https://ootci.example",
        "OOTCI_RERUN_FAILED_TESTS": "false",
        "PYTHONUNBUFFERED": "1",
    }
    for n in range(2):
        procs.start(f"worker{n}", celery_worker(f"slo{n}-{os.getpid()}"),
                    {**env, "OOTCI_HOME": str(tmp / f"worker{n}")})
    time.sleep(8)  # the workers connect
    from celery import Celery
    client = Celery(broker=broker)

    # Night 1, untimed: every backend's green history, the pinned env in the caches.
    client.send_task("ootci.nightly.schedule", args=[green.day.isoformat()], queue="ootci")
    _wait("night 1's matrix", lambda: _all_finished(_night_runs(engine, green.day), expected),
          1800, procs)
    bad = [r.id for r in _night_runs(engine, green.day) if r.state != "passed"]
    if bad:
        sys.exit(f"nightly_slo: night 1 runs {bad} did not pass\n{procs.tail(3000)}")
    print(f"night 1 ({green.version}): {expected} runs green", flush=True)

    # Night 2: the clock starts at publication; beat is the nightly's trigger (every minute).
    watcher = LabelWatcher(github)
    t0 = time.time()
    watcher.start()
    index.publish(red.version, head, {HEADER: ALLOCATOR_H_CONST})
    procs.start("beat", [sys.executable, "-m", "celery", "-A", "workers.celery_app", "beat",
                         "--loglevel=INFO", "-s", str(tmp / "beat-schedule")],
                {**env, "OOTCI_HOME": str(tmp / "beat"), "OOTCI_NIGHTLY_CRON": "* * * * *"})
    _wait("night 2's first claim",
          lambda: any(r.started_at for r in _night_runs(engine, red.day)), 300, procs)
    load_before = os.getloadavg()
    # The CPU floor is the matrix's: from its first claim to its last verdict.
    with CpuMeter() as meter:
        _wait("night 2's matrix", lambda: _all_finished(_night_runs(engine, red.day), expected),
              1800, procs)
    load_after = os.getloadavg()
    label_seen = _wait("the label", lambda: watcher.seen, 1800, procs)
    _report(engine, red, t0, label_seen, meter.use, load_before, load_after, github)


def _ts(when: dt.datetime | None) -> float | None:
    if when is None:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)).timestamp()


def _report(engine: Any, red: Night, t0: float, label_seen: float | None,
            use: Any, load_before: tuple[float, ...], load_after: tuple[float, ...],
            github: FakeGitHub) -> None:
    runs = _night_runs(engine, red.day)
    with session_scope(engine) as s:
        breakage = s.scalars(select(Breakage).where(Breakage.category == "upstream")).first()
        verifications = list(s.scalars(select(CulpritVerification)))
        verify_runs = list(s.scalars(select(Run).where(Run.trigger == "verify")))
        backend_names = {i: n for i, n in s.execute(select(Backend.id, Backend.name))}
        names = {r.id: backend_names[r.backend_id] for r in [*runs, *verify_runs]}
        events: list[tuple[float, str]] = [
            (min(_ts(r.created_at) or 0 for r in runs), f"night detected: {len(runs)} runs queued"),
            (min(_ts(r.started_at) or 1e18 for r in runs), "first run claimed"),
        ]
        for r in runs:
            events.append((_ts(r.finished_at) or 0, f"verdict {names[r.id]} @ {r.torch_spec}: "
                                                   f"{r.state} ({r.verdict or '-'})"))
        breaking = next((r for r in runs if r.state != "passed"), None)
        if breakage is not None:
            events.append((_ts(breakage.first_seen_at) or 0, f"breakage #{breakage.id} opened"))
            if breakage.culprits_ranked_at:
                top = (breakage.culprits or [{}])[0]
                events.append((_ts(breakage.culprits_ranked_at) or 0,
                               f"culprit ranked: top #{top.get('pr')} ({top.get('score')})"))
        for r in verify_runs:
            events.append((_ts(r.started_at) or 0, f"verification run {r.id} claimed"))
        for v in verifications:
            events.append((_ts(v.created_at) or 0, f"verification done: #{v.pr} {v.state}"))
        s.expunge_all()
    if label_seen is not None:
        events.append((label_seen, f"label posted on #120969 ({github.labels(REPO, 120969)})"))
    print(f"\nnight 2 ({red.version}) published at t=0; seconds after publication:")
    for when, what in sorted(events):
        print(f"  {when - t0:7.1f}  {what}")
    last_verdict = max(_ts(r.finished_at) or 0 for r in runs) - t0
    first_claim = min(_ts(r.started_at) or 1e18 for r in runs) - t0
    print(f"\nload average before {load_before[0]:.2f}, after {load_after[0]:.2f} "
          f"(1 min); {use.line()}")
    if breaking is None or label_seen is None:
        print("no breaking verdict or no label: the loop did not close")
        return
    lag = label_seen - (_ts(breaking.finished_at) or 0)
    print(f"label - breaking verdict: {lag:.1f} s = {lag / TARGET_LABEL_S:.2f} of the "
          f"{TARGET_LABEL_S:.0f} s target")
    work = last_verdict - first_claim
    print(f"verdicts: last at {last_verdict:.1f} s after publication, {work:.1f} s after the "
          f"first claim; CPU floor {use.floor_s:.1f} s -> {work / use.floor_s:.2f}x the floor "
          f"(target <= {TARGET_FLOOR_RATIO}x)")
    _print_slots(engine, [*runs, *verify_runs], first_claim + t0, last_verdict + t0)


def _print_slots(engine: Any, runs: list[Run], start: float, end: float, slots: int = 2) -> None:
    """Where the worker slots' wall time went between the matrix's first claim and its last
    verdict: inside runs (their steps, and the pipeline around them), between a slot's runs
    (hand-off: the ack, the next message, the claim), and idle before a slot's first run or
    after its last. A slot is a Celery pool process; the runs do not say which, so each run
    goes to the slot that became free last before it started (exact when no two runs on
    one slot overlap, as with ``-c 1`` workers)."""
    with session_scope(engine) as s:
        steps: dict[int, float] = {}
        for run_id, duration in s.execute(select(Step.run_id, Step.duration_s).where(
                Step.run_id.in_([r.id for r in runs]))):
            steps[run_id] = steps.get(run_id, 0.0) + (duration or 0.0)
    timed = sorted((_ts(r.started_at) or 0.0, _ts(r.finished_at) or 0.0, r.id) for r in runs
                    if r.started_at and r.finished_at)
    lanes: list[list[tuple[float, float, int]]] = [[] for _ in range(slots)]
    for run in timed:
        free = [lane for lane in lanes if not lane or lane[-1][1] <= run[0]]
        lane = max(free, key=lambda ln: ln[-1][1] if ln else -1.0) if free else min(
            lanes, key=lambda ln: ln[-1][1])
        lane.append(run)
    print("worker slots (s): runs | in steps | outside steps | between runs | idle at the ends")
    for n, lane in enumerate(lanes):
        if not lane:
            print(f"  slot {n}: no runs, idle {end - start:.1f}")
            continue
        inside = sum(b - a for a, b, _ in lane)
        in_steps = sum(steps.get(i, 0.0) for _, _, i in lane)
        between = sum(max(0.0, nxt[0] - cur[1]) for cur, nxt in zip(lane, lane[1:], strict=False))
        ends = max(0.0, lane[0][0] - start) + max(0.0, end - lane[-1][1])
        print(f"  slot {n}: {len(lane)} runs | {in_steps:.1f} | {inside - in_steps:.1f} | "
              f"{between:.1f} | {ends:.1f}")
        gaps = [f"{cur[1] - start:.1f}-{nxt[0] - start:.1f}"
                 for cur, nxt in zip(lane, lane[1:], strict=False) if nxt[0] - cur[1] > 0.5]
        if gaps:
            print(f"    hand-offs over 0.5 s (s after the first claim): {', '.join(gaps)}")


if __name__ == "__main__":
    main()
