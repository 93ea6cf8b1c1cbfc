"""Find the runs that bound a red run's regression range (see ``service.domain.regression``)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.domain.regression import RegressionRange, TorchPoint, regression_range
from service.models import Run, RunState, TorchBuild
from service.queries.bisections import narrowed_ends


def torch_point(run: Run) -> TorchPoint:
    build = run.torch_build
    return TorchPoint(
        run_id=run.id,
        version=build.version if build else "",
        git_version=build.git_version if build else "",
    )


def last_green_before(session: Session, run: Run) -> Run | None:
    """The newest passed run of the same backend on the same track (the same spec) that
    was created before ``run`` and knows its torch."""
    return session.scalar(
        select(Run)
        .join(TorchBuild, TorchBuild.id == Run.torch_build_id)
        .where(
            Run.backend_id == run.backend_id,
            Run.torch_spec == run.torch_spec,
            Run.state == RunState.PASSED,
            Run.id < run.id,
        )
        .order_by(Run.id.desc())
        .limit(1)
    )


def range_for(session: Session, run: Run, base_run: Run | None = None) -> RegressionRange:
    """The range of ``run``: against ``base_run`` when given (any two runs of one backend,
    e.g. ``path:`` or ``wheel:`` experiments), else against its track's last green run,
    narrowed to the two adjacent nightlies when a bisection of it has finished."""
    if base_run is None and (ends := narrowed_ends(session, run.id)) is not None:
        good, bad = ends
        return regression_range(torch_point(bad), torch_point(good), f"{run.torch_spec} (bisected)")
    base = base_run if base_run is not None else last_green_before(session, run)
    track = run.torch_spec if base_run is None else f"{base_run.torch_spec} (given)"
    return regression_range(torch_point(run), torch_point(base) if base else None, track)
