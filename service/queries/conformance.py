"""The conformance suite's results: one run's, the latest per backend (the matrix), a
mechanism's history, and what a backend's previous run got right (for regressions)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.models import Backend, ConformanceResult, Run, TorchBuild


def results_for_run(session: Session, run_id: int) -> list[ConformanceResult]:
    return list(session.scalars(
        select(ConformanceResult).where(ConformanceResult.run_id == run_id)
        .order_by(ConformanceResult.id)
    ))


def working(row: ConformanceResult) -> bool:
    """A mechanism works when some of its tests passed and none failed."""
    return row.passed > 0 and row.failed == 0


def previously_working(session: Session, run: Run) -> set[str]:
    """The mechanisms that worked in the backend's latest earlier run with conformance
    results: one failing now is a regression."""
    earlier = session.scalar(
        select(func.max(ConformanceResult.run_id))
        .join(Run, Run.id == ConformanceResult.run_id)
        .where(Run.backend_id == run.backend_id, Run.id < run.id)
    )
    if earlier is None:
        return set()
    return {r.mechanism for r in results_for_run(session, earlier) if working(r)}


@dataclass(frozen=True)
class BackendConformance:
    """A backend's latest conformance results: one row of the matrix."""

    backend: str
    run_id: int
    torch_version: str | None
    results: dict[str, ConformanceResult]


def latest_per_backend(session: Session) -> list[BackendConformance]:
    latest = (
        select(Run.backend_id, func.max(ConformanceResult.run_id).label("run_id"))
        .join(Run, Run.id == ConformanceResult.run_id)
        .group_by(Run.backend_id)
        .subquery()
    )
    rows = session.execute(
        select(Backend.name, latest.c.run_id, TorchBuild.version)
        .join(latest, latest.c.backend_id == Backend.id)
        .join(Run, Run.id == latest.c.run_id)
        .outerjoin(TorchBuild, TorchBuild.id == Run.torch_build_id)
        .order_by(Backend.name)
    ).all()
    return [
        BackendConformance(name, run_id, version,
                           {r.mechanism: r for r in results_for_run(session, run_id)})
        for name, run_id, version in rows
    ]


@dataclass(frozen=True)
class HistoryPoint:
    run_id: int
    backend: str
    torch_version: str | None
    created_at: dt.datetime
    result: ConformanceResult


def mechanism_history(session: Session, mechanism: str, *, limit: int = 100) -> list[HistoryPoint]:
    """A mechanism's results across runs, newest first."""
    rows = session.execute(
        select(ConformanceResult, Backend.name, TorchBuild.version, Run.created_at)
        .join(Run, Run.id == ConformanceResult.run_id)
        .join(Backend, Backend.id == Run.backend_id)
        .outerjoin(TorchBuild, TorchBuild.id == Run.torch_build_id)
        .where(ConformanceResult.mechanism == mechanism)
        .order_by(ConformanceResult.run_id.desc())
        .limit(limit)
    ).all()
    return [HistoryPoint(r.run_id, name, version, created, r) for r, name, version, created in rows]
