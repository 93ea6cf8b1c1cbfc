"""Test history: one test's outcomes across runs, and the nodeids to find one by.

Every function takes a session, never commits, and bounds what it reads: the pages must
stay fast with tens of thousands of runs and millions of test results, so each query is
either keyed by an index (run ids, nodeid, primary keys) or limited.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from service.models import (
    Backend,
    Run,
    TestResult,
    TorchBuild,
)


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


def like_pattern(q: str) -> str:
    escaped = q.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def known_nodeids(
    session: Session, q: str = "", *, limit: int = 500, max_distinct: int = 20_000
) -> list[str]:
    rows = session.execute(
        _DISTINCT_NODEIDS,
        {"pattern": like_pattern(q), "limit": limit, "max_distinct": max_distinct},
    ).scalars()
    return [str(n) for n in rows]
