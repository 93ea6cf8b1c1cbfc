"""Trends: breakages opened and resolved, and pass rates, week by week.

Every function takes a session, never commits, and bounds what it reads: the pages must
stay fast with tens of thousands of runs and millions of test results, so each query is
either keyed by an index (run ids, nodeid, primary keys) or limited.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.models import (
    Backend,
    Breakage,
    Run,
    RunState,
)


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
        .where(Run.created_at >= start_at, Run.state.in_(RunState.FINISHED))
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
