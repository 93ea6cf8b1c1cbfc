"""Read-side queries only the dashboard needs (the shared ones live next to this file).

Every function takes a session, never commits, and bounds what it reads: the pages must
stay fast with tens of thousands of runs and millions of test results, so each query is
either keyed by an index (run ids, nodeid, primary keys) or limited.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from sqlalchemy import Text, cast, func, or_, select, text
from sqlalchemy.orm import Session

from service.models import Backend, Breakage, Failure, Run, Step, TestResult, TorchBuild

FINISHED = ("passed", "failed", "errored")
FAILED_OUTCOMES = ("failed", "error", "crashed")


def has_runs(session: Session) -> bool:
    return session.scalar(select(Run.id).limit(1)) is not None


def backend_list(session: Session) -> list[str]:
    return list(session.scalars(select(Backend.name).order_by(Backend.name)))


# --- the matrix's stage details -------------------------------------------------------------


@dataclass
class StageFacts:
    """Per run: step statuses, classified failures, and test outcomes counted per suite."""

    steps: dict[int, dict[str, str]] = field(default_factory=lambda: defaultdict(dict))
    failures: dict[int, list[tuple[str, str | None, str | None, str | None, str]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    suite_counts: dict[int, dict[str, dict[str, int]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(dict))
    )
    suite_of: dict[int, dict[str, str]] = field(default_factory=lambda: defaultdict(dict))

    def suites(self) -> list[str]:
        return sorted({s for per_run in self.suite_counts.values() for s in per_run})


def stage_facts(session: Session, run_ids: Collection[int]) -> StageFacts:
    """Four queries over ``run_ids`` (each uses the run_id index of its table)."""
    facts = StageFacts()
    if not run_ids:
        return facts
    ids = list(run_ids)
    for run_id, name, status in session.execute(
        select(Step.run_id, Step.name, Step.status).where(Step.run_id.in_(ids)).order_by(Step.id)
    ):
        facts.steps[run_id][name] = status  # later attempts overwrite earlier ones
    for run_id, stage, category, subtype, nodeid, line in session.execute(
        select(
            Failure.run_id,
            Failure.stage,
            Failure.category,
            Failure.subtype,
            Failure.nodeid,
            func.substr(Failure.line, 1, 200),
        )
        .where(Failure.run_id.in_(ids))
        .order_by(Failure.id)
    ):
        facts.failures[run_id].append((stage, category, subtype, nodeid, line or ""))
    for run_id, suite, outcome, n in session.execute(
        select(TestResult.run_id, TestResult.suite, TestResult.outcome, func.count())
        .where(TestResult.run_id.in_(ids))
        .group_by(TestResult.run_id, TestResult.suite, TestResult.outcome)
    ):
        facts.suite_counts[run_id][suite][outcome] = int(n)
    for run_id, nodeid, suite in session.execute(
        select(TestResult.run_id, TestResult.nodeid, TestResult.suite).where(
            TestResult.run_id.in_(ids), TestResult.outcome.in_(FAILED_OUTCOMES)
        )
    ):
        facts.suite_of[run_id][nodeid] = suite
    return facts


def failed_results(session: Session, run_id: int, *, limit: int) -> list[TestResult]:
    """A run's failed, errored and crashed tests (the run_id index, then a filter)."""
    return list(session.scalars(
        select(TestResult)
        .where(TestResult.run_id == run_id, TestResult.outcome.in_(FAILED_OUTCOMES))
        .order_by(TestResult.id)
        .limit(limit)
    ))


def active_runs(session: Session, *, limit: int = 10) -> list[tuple[Run, str]]:
    """Queued and running runs, newest first (the ix_runs_state_created index)."""
    rows = session.execute(
        select(Run, Backend.name)
        .join(Backend, Backend.id == Run.backend_id)
        .where(Run.state.in_(("queued", "running")))
        .order_by(Run.created_at.desc())
        .limit(limit)
    )
    return list(rows)


# --- labels of torch targets ----------------------------------------------------------------


def target_labels(session: Session, run_ids: Collection[int]) -> dict[int, str]:
    """run id -> how the dashboard names its torch target (version + sha, or the spec)."""
    if not run_ids:
        return {}
    out: dict[int, str] = {}
    for run_id, spec, build in session.execute(
        select(Run.id, Run.torch_spec, TorchBuild)
        .outerjoin(TorchBuild, TorchBuild.id == Run.torch_build_id)
        .where(Run.id.in_(list(run_ids)))
    ):
        out[run_id] = build.label if build is not None else spec
    return out


# --- test history ---------------------------------------------------------------------------


@dataclass(frozen=True)
class HistoryEntry:
    run_id: int
    backend: str
    target: str
    created_at: dt.datetime
    outcome: str
    duration_s: float | None
    message: str | None


def history_of_test(
    session: Session, nodeid: str, *, limit: int = 60, backend: str | None = None
) -> list[HistoryEntry]:
    """A contract test's outcome in its latest ``limit`` runs, newest first.

    Ordered by test_results.id (rows are written as runs finish, so it follows run order)
    to let Postgres walk ix_test_results_nodeid without sorting every run of the test."""
    stmt = (
        select(
            TestResult.run_id,
            Backend.name,
            Run.torch_spec,
            TorchBuild,
            Run.created_at,
            TestResult.outcome,
            TestResult.duration_s,
            func.substr(TestResult.message, 1, 300),
        )
        .join(Run, Run.id == TestResult.run_id)
        .join(Backend, Backend.id == Run.backend_id)
        .outerjoin(TorchBuild, TorchBuild.id == Run.torch_build_id)
        .where(TestResult.nodeid == nodeid)
        .order_by(TestResult.id.desc())
        .limit(limit)
    )
    if backend:
        stmt = stmt.where(Backend.name == backend)
    return [
        HistoryEntry(
            run_id,
            name,
            build.label if build is not None else spec,
            created,
            outcome,
            duration,
            message,
        )
        for run_id, name, spec, build, created, outcome, duration, message in session.execute(
            stmt
        )
    ]


# Distinct nodeids through the nodeid index, one index probe per distinct value (a "loose
# index scan"): far cheaper than DISTINCT over a million rows, on SQLite and Postgres alike.
# The depth bound keeps a pathological table from turning a page into a long walk.
_DISTINCT_NODEIDS = text(
    """
    WITH RECURSIVE ids(n, depth) AS (
        SELECT (SELECT min(nodeid) FROM test_results), 0
        UNION ALL
        SELECT (SELECT min(t.nodeid) FROM test_results t WHERE t.nodeid > ids.n), depth + 1
        FROM ids WHERE ids.n IS NOT NULL AND depth < :max_distinct
    )
    SELECT n FROM ids WHERE n IS NOT NULL AND lower(n) LIKE :pattern ESCAPE '\\'
    LIMIT :limit
    """
)


def _like_pattern(q: str) -> str:
    escaped = q.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def known_nodeids(
    session: Session, q: str = "", *, limit: int = 500, max_distinct: int = 20_000
) -> list[str]:
    rows = session.execute(
        _DISTINCT_NODEIDS,
        {"pattern": _like_pattern(q), "limit": limit, "max_distinct": max_distinct},
    ).scalars()
    return [str(n) for n in rows]


# --- search ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class FailureHit:
    failure_id: int
    run_id: int
    backend: str
    stage: str
    category: str | None
    subtype: str | None
    nodeid: str | None
    line: str
    created_at: dt.datetime


@dataclass(frozen=True)
class SearchResults:
    query: str
    tests: list[str]
    failures: list[FailureHit]
    breakages: list[Breakage]
    limit: int


def search(session: Session, q: str, *, limit: int = 50) -> SearchResults:
    """Case-insensitive substring search (LIKE/ILIKE, user wildcards escaped).

    Tests: distinct nodeids via the index walk above. Failures and breakages: newest first
    by primary key with LIMIT, so a common term stops after ``limit`` hits; a rare one scans
    the failures table, which holds one row per classified failure (thousands, not the
    millions of test results). Symbols and headers are found through ``captures``."""
    q = q.strip()
    pattern = _like_pattern(q)
    tests = known_nodeids(session, q, limit=limit)
    failure_rows = session.execute(
        select(
            Failure.id,
            Failure.run_id,
            Backend.name,
            Failure.stage,
            Failure.category,
            Failure.subtype,
            Failure.nodeid,
            func.substr(Failure.line, 1, 300),
            Run.created_at,
        )
        .join(Run, Run.id == Failure.run_id)
        .join(Backend, Backend.id == Run.backend_id)
        .where(
            or_(
                func.lower(Failure.line).like(pattern, escape="\\"),
                func.lower(cast(Failure.captures, Text)).like(pattern, escape="\\"),
                func.lower(Failure.nodeid).like(pattern, escape="\\"),
            )
        )
        .order_by(Failure.id.desc())
        .limit(limit)
    )
    breakages = list(
        session.scalars(
            select(Breakage)
            .where(
                or_(
                    func.lower(Breakage.title).like(pattern, escape="\\"),
                    func.lower(cast(Breakage.captures, Text)).like(pattern, escape="\\"),
                )
            )
            .order_by(Breakage.id.desc())
            .limit(limit)
        )
    )
    return SearchResults(
        query=q,
        tests=tests,
        failures=[FailureHit(*row) for row in failure_rows],
        breakages=breakages,
        limit=limit,
    )


# --- trends ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trends:
    weeks: list[dt.date]  # Monday of each week, oldest first
    opened: list[int]
    resolved: list[int]
    # backend -> pass rate per week (None: no finished run that week)
    pass_rate: dict[str, list[float | None]]


def _monday(value: dt.datetime | dt.date) -> dt.date:
    d = value.date() if isinstance(value, dt.datetime) else value
    return d - dt.timedelta(days=d.weekday())


def trends(session: Session, *, weeks: int = 26) -> Trends:
    """Weekly counts ending with the week of the newest run (not today: a demo or an idle
    instance still shows its data). Rows are bucketed here, not in SQL, because week
    truncation differs between SQLite and Postgres; the window bounds what is read."""
    newest = session.scalar(select(func.max(Run.created_at)))
    newest_breakage = session.scalar(select(func.max(Breakage.last_seen_at)))
    end_at = max((v for v in (newest, newest_breakage) if v is not None), default=None)
    end = _monday(end_at) if end_at else _monday(dt.datetime.now(dt.UTC))
    start = end - dt.timedelta(weeks=weeks - 1)
    start_at = dt.datetime.combine(start, dt.time(0), dt.UTC)
    week_list = [start + dt.timedelta(weeks=i) for i in range(weeks)]
    index = {w: i for i, w in enumerate(week_list)}

    opened = [0] * weeks
    resolved = [0] * weeks
    for (first_seen,) in session.execute(
        select(Breakage.first_seen_at).where(Breakage.first_seen_at >= start_at)
    ):
        i = index.get(_monday(first_seen))
        if i is not None:
            opened[i] += 1
    for (resolved_at,) in session.execute(
        select(Breakage.resolved_at).where(Breakage.resolved_at >= start_at)
    ):
        i = index.get(_monday(resolved_at)) if resolved_at is not None else None
        if i is not None:
            resolved[i] += 1

    passed: dict[str, list[int]] = defaultdict(lambda: [0] * weeks)
    total: dict[str, list[int]] = defaultdict(lambda: [0] * weeks)
    for name, state, created in session.execute(
        select(Backend.name, Run.state, Run.created_at)
        .join(Backend, Backend.id == Run.backend_id)
        .where(Run.created_at >= start_at, Run.state.in_(FINISHED))
    ):
        i = index.get(_monday(created))
        if i is None:
            continue
        total[name][i] += 1
        if state == "passed":
            passed[name][i] += 1
    rates = {
        name: [p / t if t else None for p, t in zip(passed[name], total[name], strict=True)]
        for name in sorted(total)
    }
    return Trends(week_list, opened, resolved, rates)


# --- runs around a breakage -----------------------------------------------------------------


def runs_by_id(session: Session, run_ids: Sequence[int | None]) -> dict[int, Run]:
    ids = [i for i in run_ids if i is not None]
    if not ids:
        return {}
    return {r.id: r for r in session.scalars(select(Run).where(Run.id.in_(ids)))}
