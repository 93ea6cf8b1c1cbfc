"""The compatibility matrix: the latest verdict of every backend on every torch target.

A target is the resolved torch build (version + git sha) when the run got that far, else
the spec it asked for (a queued run, or one that failed to provision). So each nightly is
its own row, and a pin's row moves only when the pin resolves to something new.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import ColumnElement, case, func, select
from sqlalchemy.orm import Session

from service.domain.experiments import EXPERIMENTS
from service.models import Backend, Run, TorchBuild


@dataclass(frozen=True)
class MatrixCell:
    backend: str
    torch_spec: str
    torch_build_id: int | None
    torch_version: str | None
    torch_git_version: str | None
    run_id: int
    state: str
    verdict: str | None
    verdict_subtype: str | None
    created_at: dt.datetime
    finished_at: dt.datetime | None


@dataclass(frozen=True)
class TargetKey:
    torch_build_id: int | None
    torch_spec: str | None  # set only when the target is unresolved


def _unresolved_spec() -> ColumnElement[str | None]:
    return case((Run.torch_build_id.is_(None), Run.torch_spec), else_=None)


def latest_targets(
    session: Session, *, limit: int = 30, backend: str | None = None
) -> list[TargetKey]:
    """The ``limit`` most recently run targets, newest first."""
    spec = _unresolved_spec().label("spec")
    # An experiment's torch (a bisection's night, a verification's overlay) is no target.
    stmt = select(Run.torch_build_id, spec, func.max(Run.id).label("last")).where(
        Run.trigger.not_in(EXPERIMENTS)
    ).group_by(Run.torch_build_id, spec)
    if backend is not None:
        stmt = stmt.join(Backend, Backend.id == Run.backend_id).where(Backend.name == backend)
    rows = session.execute(stmt.order_by(func.max(Run.id).desc()).limit(limit)).all()
    return [TargetKey(torch_build_id=r[0], torch_spec=r[1]) for r in rows]


def matrix(
    session: Session, *, limit_targets: int = 30, backend: str | None = None
) -> list[MatrixCell]:
    """Cells of the newest ``limit_targets`` targets, newest target first."""
    targets = latest_targets(session, limit=limit_targets, backend=backend)
    if not targets:
        return []
    built = [t.torch_build_id for t in targets if t.torch_build_id is not None]
    unresolved = [t.torch_spec for t in targets if t.torch_build_id is None]
    spec = _unresolved_spec()
    in_targets: list[ColumnElement[bool]] = []
    if built:
        in_targets.append(Run.torch_build_id.in_(built))
    if unresolved:
        in_targets.append(Run.torch_build_id.is_(None) & Run.torch_spec.in_(unresolved))
    latest = (
        select(func.max(Run.id).label("id"))
        .where(in_targets[0] if len(in_targets) == 1 else in_targets[0] | in_targets[1])
        .group_by(Run.backend_id, Run.torch_build_id, spec)
    )
    if backend is not None:
        latest = latest.join(Backend, Backend.id == Run.backend_id).where(Backend.name == backend)
    rows = session.execute(
        select(Run, Backend.name, TorchBuild)
        .join(Backend, Backend.id == Run.backend_id)
        .outerjoin(TorchBuild, TorchBuild.id == Run.torch_build_id)
        .where(Run.id.in_(latest.scalar_subquery()))
    ).all()
    order = {(t.torch_build_id, t.torch_spec): i for i, t in enumerate(targets)}
    cells = [
        MatrixCell(
            backend=name,
            torch_spec=run.torch_spec,
            torch_build_id=run.torch_build_id,
            torch_version=build.version if build else None,
            torch_git_version=build.git_version if build else None,
            run_id=run.id,
            state=run.state,
            verdict=run.verdict,
            verdict_subtype=run.verdict_subtype,
            created_at=run.created_at,
            finished_at=run.finished_at,
        )
        for run, name, build in rows
    ]
    cells.sort(
        key=lambda c: (
            order[(c.torch_build_id, None if c.torch_build_id is not None else c.torch_spec)],
            c.backend,
        )
    )
    return cells


__all__ = ["MatrixCell", "TargetKey", "latest_targets", "matrix"]
