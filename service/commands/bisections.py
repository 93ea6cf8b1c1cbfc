"""The write side of nightly bisection: open one for a breakage whose range spans
several nightlies, queue its probe runs, record what they showed, and settle it.

What to probe next is ``service/domain/bisect.py``'s decision; the job
(``workers/jobs/bisect.py``) reads the results and calls these. The caller commits.
Settling moves the breakage's range to the narrowed one; asking for its ranking is the
caller's (``service.commands.culprits``), so that module, which opens bisections, is the
only one of the two that imports the other.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.commands.runs import create_run
from service.domain.bisect import TRIGGER, BisectionState, ProbeResult, nights_of_range, spec_of
from service.domain.regression import RegressionRange
from service.models import Backend, Bisection, BisectionProbe, Breakage, Run, utcnow


def start(session: Session, breakage: Breakage, found: RegressionRange) -> Bisection | None:
    """Open the breakage's bisection when its complete range spans more than one nightly;
    None: nothing to bisect (one night, not nightlies, no range), or it has one already."""
    if not found.complete or found.base is None:
        return None
    nights = nights_of_range(found.base.version, found.head.version)
    if nights is None:
        return None
    existing = session.scalar(select(Bisection).where(Bisection.breakage_id == breakage.id))
    if existing is not None:
        return None
    good, bad = nights
    bisection = Bisection(
        breakage_id=breakage.id,
        backend_id=breakage.backend_id,
        head_run_id=found.head.run_id,
        base_run_id=found.base.run_id,
        base_version=found.base.version,
        head_version=found.head.version,
        state=BisectionState.RUNNING,
        good_run_id=found.base.run_id,
        bad_run_id=found.head.run_id,
    )
    session.add(bisection)
    session.flush()
    breakage.culprits_note = (
        f"bisecting the {(bad - good).days - 1} nightlies between {good} and {bad} "
        "before ranking the range"
    )
    return bisection


def queue_probe(
    session: Session, bisection: Bisection, night: dt.date, failed_tests: list[str]
) -> Run:
    """A queued probe run of the red run's backend sha on ``night``'s nightly: only the
    torch differs from the breakage's runs. ``failed_tests``: the breakage's tests (the
    run repeats only those), empty for the whole suite."""
    head = session.get_one(Run, bisection.head_run_id)
    backend = session.get_one(Backend, bisection.backend_id)
    run = create_run(
        session, backend, spec_of(night), trigger=TRIGGER, backend_sha=head.backend_sha,
        trigger_info={"bisection_id": bisection.id, "breakage_id": bisection.breakage_id,
                      "night": night.isoformat(), "failed_tests": failed_tests[:500]},
    )
    session.add(BisectionProbe(bisection_id=bisection.id, night=night, spec=spec_of(night),
                               run_id=run.id, result=ProbeResult.PENDING))
    session.flush()
    return run


def skip_night(session: Session, bisection: Bisection, night: dt.date, why: str) -> None:
    """Record a night that gets no run (not on the index), so every view says why."""
    session.add(BisectionProbe(bisection_id=bisection.id, night=night, spec=spec_of(night),
                               run_id=None, result=ProbeResult.SKIPPED, note=why))
    session.flush()


def record_result(probe: BisectionProbe, result: ProbeResult, note: str | None = None) -> None:
    probe.result = result
    probe.note = note


def settle(
    session: Session,
    bisection: Bisection,
    state: BisectionState,
    *,
    good_run_id: int,
    bad_run_id: int,
    note: str,
) -> None:
    """End the bisection on its narrowed range (the runs whose torch is its good and its
    bad night). The breakage's range columns are the caller's to move."""
    bisection.state = state
    bisection.good_run_id = good_run_id
    bisection.bad_run_id = bad_run_id
    bisection.note = note
    bisection.finished_at = utcnow()
