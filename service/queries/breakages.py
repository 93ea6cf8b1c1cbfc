"""Breakages: the list (open first) and one breakage with its occurrences and evidence."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from service.domain.verdict import severity_rank
from service.models import Backend, Breakage, BreakageStatus, Failure, Run, TorchBuild


@dataclass(frozen=True)
class BreakageFilters:
    status: str | None = None
    backend: str | None = None
    category: str | None = None


@dataclass(frozen=True)
class BreakagePage:
    breakages: list[Breakage]
    total: int
    backend_names: dict[int, str]


def list_breakages(
    session: Session,
    filters: BreakageFilters = BreakageFilters(),
    *,
    limit: int = 50,
    offset: int = 0,
) -> BreakagePage:
    """Open before resolved, then most recently seen first."""
    where = []
    if filters.status is not None:
        where.append(Breakage.status == filters.status)
    if filters.category is not None:
        where.append(Breakage.category == filters.category)
    if filters.backend is not None:
        where.append(
            Breakage.backend_id.in_(select(Backend.id).where(Backend.name == filters.backend))
        )
    total = session.scalar(select(func.count(Breakage.id)).where(*where)) or 0
    open_first = case((Breakage.status == BreakageStatus.OPEN, 0), else_=1)
    rows = list(
        session.scalars(
            select(Breakage)
            .where(*where)
            .order_by(open_first, Breakage.last_seen_at.desc(), Breakage.id.desc())
            .offset(offset)
            .limit(limit)
        )
    )
    ids = {b.backend_id for b in rows}
    names = (
        {
            k: v
            for k, v in session.execute(select(Backend.id, Backend.name).where(Backend.id.in_(ids)))
        }
        if ids
        else {}
    )
    return BreakagePage(breakages=rows, total=total, backend_names=names)


def get_breakage(session: Session, breakage_id: int) -> Breakage | None:
    return session.get(Breakage, breakage_id)


@dataclass(frozen=True)
class Occurrence:
    """The failures of one run that belong to the breakage (one night, one torch build)."""

    run_id: int
    run_state: str
    torch_spec: str
    torch_version: str | None
    torch_git_version: str | None
    run_created_at: dt.datetime
    failures: int
    nodeids: list[str]
    # What triage said of them in that run (the worst, by the one severity order).
    category: str | None = None


def occurrences(session: Session, breakage_id: int, *, limit: int = 100) -> list[Occurrence]:
    """Its history across nights: failures grouped by run, newest run first."""
    grouped = (
        select(Failure.run_id, func.count(Failure.id).label("n"))
        .where(Failure.breakage_id == breakage_id)
        .group_by(Failure.run_id)
        .order_by(Failure.run_id.desc())
        .limit(limit)
        .subquery()
    )
    rows = session.execute(
        select(Run, TorchBuild, grouped.c.n)
        .join(grouped, grouped.c.run_id == Run.id)
        .outerjoin(TorchBuild, TorchBuild.id == Run.torch_build_id)
        .order_by(Run.id.desc())
    ).all()
    run_ids = [run.id for run, _, _ in rows]
    nodeids: dict[int, list[str]] = {rid: [] for rid in run_ids}
    triaged: dict[int, str] = {}
    if run_ids:
        for rid, nodeid, category in session.execute(
            select(Failure.run_id, Failure.nodeid, Failure.triage)
            .where(Failure.breakage_id == breakage_id, Failure.run_id.in_(run_ids))
            .order_by(Failure.id)
        ):
            if nodeid and nodeid not in nodeids[rid]:
                nodeids[rid].append(nodeid)
            if category and (rid not in triaged
                             or severity_rank(category) < severity_rank(triaged[rid])):
                triaged[rid] = category
    return [
        Occurrence(
            run_id=run.id,
            run_state=run.state,
            torch_spec=run.torch_spec,
            torch_version=build.version if build else None,
            torch_git_version=build.git_version if build else None,
            run_created_at=run.created_at,
            failures=n,
            nodeids=nodeids[run.id],
            category=triaged.get(run.id),
        )
        for run, build, n in rows
    ]


def first_evidence(session: Session, breakage_id: int) -> Failure | None:
    """The failure of its first occurrence: the line, captures and classifier finding."""
    return session.scalar(
        select(Failure).where(Failure.breakage_id == breakage_id).order_by(Failure.id).limit(1)
    )
