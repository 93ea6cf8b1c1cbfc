"""Aggregates for /metrics: read on every Prometheus scrape, so each is one indexed query."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from service.models import Run, Step

# Seconds; a step is a pip install, a C++ build or a test suite: seconds to hours.
STEP_DURATION_BUCKETS: tuple[float, ...] = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)


def runs_by_state(session: Session) -> dict[str, int]:
    return {
        state: n
        for state, n in session.execute(select(Run.state, func.count()).group_by(Run.state))
    }


@dataclass(frozen=True)
class Histogram:
    # Cumulative counts per upper bound, ending with +Inf, as Prometheus wants them.
    buckets: list[tuple[str, int]]
    count: int
    total: float


def step_duration_histograms(session: Session) -> dict[str, Histogram]:
    """One histogram per step name over every finished step, bucketed in the database."""
    columns = [
        func.sum(case((Step.duration_s <= bound, 1), else_=0)).label(f"le_{i}")
        for i, bound in enumerate(STEP_DURATION_BUCKETS)
    ]
    rows = session.execute(
        select(
            Step.name, func.count(Step.id), func.coalesce(func.sum(Step.duration_s), 0.0), *columns
        )
        .where(Step.duration_s.is_not(None))
        .group_by(Step.name)
    ).all()
    out: dict[str, Histogram] = {}
    for row in rows:
        name, count, total, *per_bucket = row
        buckets = [
            (_fmt(b), int(c or 0)) for b, c in zip(STEP_DURATION_BUCKETS, per_bucket, strict=True)
        ]
        buckets.append(("+Inf", int(count)))
        out[name] = Histogram(buckets=buckets, count=int(count), total=float(total))
    return out


def _fmt(bound: float) -> str:
    return str(float(bound))
