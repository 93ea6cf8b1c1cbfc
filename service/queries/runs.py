"""Runs: filtered, paginated listing; one run with its steps, failures and test results."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session, selectinload

from service.models import (
    Backend,
    Failure,
    Run,
    RunState,
    Step,
    StepStatus,
    TestResult,
    TorchBuild,
)


@dataclass(frozen=True)
class RunFilters:
    backend: str | None = None
    state: str | None = None
    torch_spec: str | None = None
    torch_version: str | None = None
    trigger: str | None = None


@dataclass(frozen=True)
class RunPage:
    runs: list[Run]
    total: int
    # Pass back as ``before_id`` for the next page; None on the last page.
    next_cursor: int | None
    backend_names: dict[int, str] = field(default_factory=dict)
    # True when ``total`` stopped counting at the cap: there are at least that many.
    total_capped: bool = False


_Row = TypeVar("_Row")


def _filtered(stmt: Select[_Row], filters: RunFilters) -> Select[_Row]:
    if filters.backend is not None:
        stmt = stmt.join(Backend, Backend.id == Run.backend_id).where(
            Backend.name == filters.backend
        )
    if filters.state is not None:
        stmt = stmt.where(Run.state == filters.state)
    if filters.torch_spec is not None:
        stmt = stmt.where(Run.torch_spec == filters.torch_spec)
    if filters.torch_version is not None:
        stmt = stmt.join(TorchBuild, TorchBuild.id == Run.torch_build_id).where(
            TorchBuild.version == filters.torch_version
        )
    if filters.trigger is not None:
        stmt = stmt.where(Run.trigger == filters.trigger)
    return stmt


def list_runs(
    session: Session,
    filters: RunFilters = RunFilters(),
    *,
    limit: int = 50,
    offset: int = 0,
    before_id: int | None = None,
    count_cap: int | None = None,
) -> RunPage:
    """Newest first. Ids grow with creation time, so ordering by id walks the primary key
    index instead of sorting; ``before_id`` is keyset pagination (stable under inserts),
    ``offset`` the simple kind. ``total`` counts every match of the filters, or stops at
    ``count_cap`` (``total_capped``): an exact count of a large table is a full scan on
    every request, and past a few thousand runs nobody pages by number anyway."""
    if count_cap is None:
        total = session.scalar(_filtered(select(func.count(Run.id)), filters)) or 0
    else:
        matching = _filtered(select(Run.id), filters).limit(count_cap + 1).subquery()
        total = session.scalar(select(func.count()).select_from(matching)) or 0
    stmt = _filtered(select(Run), filters)
    if before_id is not None:
        stmt = stmt.where(Run.id < before_id)
    rows = list(
        session.scalars(stmt.order_by(Run.id.desc()).offset(offset).limit(limit + 1)).unique()
    )
    has_more = len(rows) > limit
    runs = rows[:limit]
    capped = count_cap is not None and total > count_cap
    return RunPage(
        runs=runs,
        total=min(total, count_cap) if capped and count_cap is not None else total,
        total_capped=capped,
        next_cursor=runs[-1].id if has_more and runs else None,
        backend_names=backend_names(session, {r.backend_id for r in runs}),
    )


def backend_names(session: Session, ids: set[int]) -> dict[int, str]:
    if not ids:
        return {}
    return {
        k: v
        for k, v in session.execute(select(Backend.id, Backend.name).where(Backend.id.in_(ids)))
    }


def get_run(session: Session, run_id: int) -> Run | None:
    """A run with its steps and failures loaded (test results are paged separately)."""
    return session.scalar(
        select(Run)
        .where(Run.id == run_id)
        .options(selectinload(Run.step_rows), selectinload(Run.failures))
    )


@dataclass(frozen=True)
class AttemptSummary:
    """One attempt of a run, told from its steps: when it ran, how and why it ended."""

    number: int
    current: bool
    steps: list[Step]
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    outcome: str  # the run's state for the current attempt; errored | failed | lost before
    reason: str | None


def attempt_history(run: Run) -> list[AttemptSummary]:
    """Every attempt that opened a step, oldest first; the last is the current one. An
    earlier attempt ended with its last step: an errored step's summary is the infra reason
    that sent the run back to the queue; a step never closed means its process died (or
    lost the lease) mid-step, and the sweep or another worker took the run over."""
    by_number: dict[int, list[Step]] = {}
    for step in run.step_rows:
        by_number.setdefault(step.attempt, []).append(step)
    current = max(by_number, default=0)
    history = []
    for number in sorted(by_number):
        steps = by_number[number]
        starts = [s.started_at for s in steps if s.started_at is not None]
        ends = [s.finished_at for s in steps if s.finished_at is not None]
        last = steps[-1]
        unclosed = last.status in (StepStatus.RUNNING, StepStatus.PENDING)
        if number == current:
            outcome = run.state
            reason = run.error or run.verdict_reason
            finished = run.finished_at if RunState(run.state).finished else None
        elif unclosed:
            outcome = "lost"
            reason = (f"its process died or lost the run's lease during the {last.name} step;"
                      " a later attempt started over")
            finished = None
        else:
            outcome = last.status if last.status in (StepStatus.ERRORED, StepStatus.FAILED) \
                else StepStatus.ERRORED.value
            reason = last.summary or f"it stopped after the {last.name} step"
            finished = max(ends, default=None)
        history.append(AttemptSummary(number, number == current, steps, min(starts, default=None),
                                      finished, str(outcome), reason))
    return history


def get_backend(session: Session, backend_id: int) -> Backend | None:
    return session.get(Backend, backend_id)


def outcome_counts(session: Session, run_id: int) -> dict[str, int]:
    rows = session.execute(
        select(TestResult.outcome, func.count())
        .where(TestResult.run_id == run_id)
        .group_by(TestResult.outcome)
    )
    return {outcome: count for outcome, count in rows}


@dataclass(frozen=True)
class TestPage:
    __test__ = False

    results: list[TestResult]
    total: int


def list_test_results(
    session: Session,
    run_id: int,
    *,
    outcome: str | None = None,
    suite: str | None = None,
    limit: int = 500,
    offset: int = 0,
) -> TestPage:
    where = [TestResult.run_id == run_id]
    if outcome is not None:
        where.append(TestResult.outcome == outcome)
    if suite is not None:
        where.append(TestResult.suite == suite)
    total = session.scalar(select(func.count(TestResult.id)).where(*where)) or 0
    results = list(
        session.scalars(
            select(TestResult).where(*where).order_by(TestResult.id).offset(offset).limit(limit)
        )
    )
    return TestPage(results=results, total=total)


def get_step(session: Session, run_id: int, name: str, attempt: int | None = None) -> Step | None:
    """The step of that name in ``attempt``, by default the run's current attempt (the
    newest that opened a step): None when that attempt has not reached it."""
    if attempt is None:
        newest = select(func.max(Step.attempt)).where(Step.run_id == run_id).scalar_subquery()
        where = Step.attempt == newest
    else:
        where = Step.attempt == attempt
    return session.scalar(
        select(Step)
        .where(Step.run_id == run_id, Step.name == name, where)
        .order_by(Step.id.desc())
        .limit(1)
    )


def failures_of_run(session: Session, run_id: int) -> list[Failure]:
    return list(
        session.scalars(select(Failure).where(Failure.run_id == run_id).order_by(Failure.id))
    )


# ---------------------------------------------------------------------------- for the pages
def has_runs(session: Session) -> bool:
    return session.scalar(select(Run.id).limit(1)) is not None


def backend_list(session: Session) -> list[str]:
    return list(session.scalars(select(Backend.name).order_by(Backend.name)))


def active_runs(session: Session, *, limit: int = 10) -> list[tuple[Run, str]]:
    """Queued and running runs, newest first (the ix_runs_state_created index)."""
    rows = session.execute(
        select(Run, Backend.name)
        .join(Backend, Backend.id == Run.backend_id)
        .where(Run.state.in_(RunState.ACTIVE))
        .order_by(Run.created_at.desc())
        .limit(limit)
    )
    return list(rows)


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


def runs_by_id(session: Session, run_ids: Sequence[int | None]) -> dict[int, Run]:
    ids = [i for i in run_ids if i is not None]
    if not ids:
        return {}
    return {r.id: r for r in session.scalars(select(Run).where(Run.id.in_(ids)))}


ActiveRunKey = tuple[int, str, str | None, str | None]


def active_run_keys(session: Session, backend_ids: Collection[int]) -> dict[ActiveRunKey, int]:
    """The queued or running runs of these backends by (backend, torch spec, backend sha,
    the upstream sha they were triggered for): what a trigger would otherwise duplicate."""
    rows = session.execute(
        select(Run.id, Run.backend_id, Run.torch_spec, Run.backend_sha, Run.trigger_info)
        .where(Run.state.in_(RunState.ACTIVE), Run.backend_id.in_(backend_ids))
    )
    keys: dict[ActiveRunKey, int] = {}
    for run_id, backend_id, spec, backend_sha, info in rows:
        sha = (info or {}).get("sha")
        keys.setdefault((backend_id, spec, backend_sha, sha if isinstance(sha, str) else None),
                        run_id)
    return keys
