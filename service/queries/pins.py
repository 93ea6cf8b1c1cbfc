"""Pin report: the newest torch build every backend was green on."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.models import Backend, Run, RunState, TorchBuild


@dataclass(frozen=True)
class GreenBuild:
    backend: str
    torch_build_id: int
    spec: str
    version: str
    git_version: str
    run_id: int
    finished_at: dt.datetime | None


def newest_green_builds(session: Session) -> list[GreenBuild]:
    """Per backend, the most recently created torch build with a passed run on it.

    "Newest" is by when the build was first provisioned (TorchBuild.created_at): for
    nightlies that is their date order, which string versions would not give reliably."""
    green = (
        select(
            Run.backend_id,
            Run.torch_build_id,
            func.max(Run.id).label("run_id"),
        )
        .where(Run.state == RunState.PASSED, Run.torch_build_id.is_not(None))
        .group_by(Run.backend_id, Run.torch_build_id)
        .subquery()
    )
    ranked = (
        select(
            green.c.backend_id,
            green.c.torch_build_id,
            green.c.run_id,
            func.row_number()
            .over(
                partition_by=green.c.backend_id,
                order_by=(TorchBuild.created_at.desc(), TorchBuild.id.desc()),
            )
            .label("rn"),
        )
        .join(TorchBuild, TorchBuild.id == green.c.torch_build_id)
        .subquery()
    )
    rows = session.execute(
        select(Backend.name, TorchBuild, Run.id, Run.finished_at)
        .select_from(ranked)
        .join(Backend, Backend.id == ranked.c.backend_id)
        .join(TorchBuild, TorchBuild.id == ranked.c.torch_build_id)
        .join(Run, Run.id == ranked.c.run_id)
        .where(ranked.c.rn == 1)
        .order_by(Backend.name)
    ).all()
    return [
        GreenBuild(
            backend=name,
            torch_build_id=build.id,
            spec=build.spec,
            version=build.version,
            git_version=build.git_version,
            run_id=run_id,
            finished_at=finished_at,
        )
        for name, build, run_id, finished_at in rows
    ]
