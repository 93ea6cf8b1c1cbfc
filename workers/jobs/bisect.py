"""The nightly bisection job: advance every running bisection by what its probe runs
showed since the last call, and queue the next probe each one asks for.

Nothing here waits for a run: a call records the probes that finished, asks
``service/domain/bisect.py`` what to do, queues at most one new probe run per bisection
(returned, for the caller to dispatch) or settles the bisection and asks for the
narrowed range's ranking. The ``ootci.bisect.advance`` task calls it after every run and
on a schedule; ``ootci bisect`` calls it in a loop, executing the probes itself.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Callable, Collection

from sqlalchemy.orm import Session

from service.commands import bisections as commands
from service.commands import culprits
from service.domain.bisect import (
    BisectionState,
    Decision,
    ProbeResult,
    decide,
    nights_of_range,
    probe_result,
)
from service.models import Bisection, Breakage, Run
from service.queries import bisections as queries
from service.queries.regression import range_for

log = logging.getLogger(__name__)

# The nightly dates on the index, or None when it cannot be read now (the caller's:
# ``workers.pipeline.env.resolve.nightly_dates``; jobs do not import the pipeline).
NightsOnIndex = Callable[[], Collection[dt.date] | None]


class _IndexUnreadable(Exception):
    pass


def advance(session: Session, nights: NightsOnIndex) -> list[int]:
    """One step of every running bisection; the ids of the probe runs it queued. The index
    is read once at most, and only when a decision needs it."""
    read: list[Collection[dt.date] | None] = []

    def on_index() -> Collection[dt.date]:
        if not read:
            read.append(nights())
        if read[0] is None:
            raise _IndexUnreadable
        return read[0]

    queued: list[int] = []
    for bisection in queries.active(session):
        try:
            run_id = _step(session, bisection, on_index)
        except _IndexUnreadable:
            # Nothing is decided without the index: the next call tries again.
            log.warning("bisection %s: the nightly index cannot be read; later", bisection.id)
            continue
        if run_id is not None:
            queued.append(run_id)
    return queued


def _step(
    session: Session, bisection: Bisection, nights: Callable[[], Collection[dt.date]]
) -> int | None:
    target = queries.target(session, bisection)
    for probe in bisection.probes:
        if probe.result == ProbeResult.PENDING and probe.run_id is not None:
            state, error_kind, failures = queries.run_facts(session, probe.run_id)
            result = probe_result(state, error_kind, failures, target)
            if result is not ProbeResult.PENDING:
                commands.record_result(probe, result, _why(result, state, error_kind))
    if any(p.result == ProbeResult.PENDING for p in bisection.probes):
        return None  # a probe still runs: nothing to decide, no need to read the index
    tried: dict[dt.date, list[ProbeResult]] = defaultdict(list)
    for probe in bisection.probes:
        tried[probe.night].append(ProbeResult(probe.result))
    ends = nights_of_range(bisection.base_version, bisection.head_version)
    if ends is None:  # start() opens none such; a hand-edited row is settled as it is
        _settle(session, bisection, None)
        return None
    decision = decide(*ends, tried, nights())
    for night in decision.skipped:
        if night not in tried:
            commands.skip_night(session, bisection, night, "not on the nightly index")
    if decision.probe is not None:
        return commands.queue_probe(session, bisection, decision.probe,
                                    sorted(target.nodeids)).id
    if decision.waiting:
        return None
    _settle(session, bisection, decision)
    return None


def _why(result: ProbeResult, state: str, error_kind: str | None) -> str | None:
    if result is ProbeResult.ERROR:
        return f"the run {state} ({error_kind or 'no kind'}): tried again once, then skipped"
    if result is ProbeResult.SKIPPED:
        return f"the run {state} before the breakage's stage ({error_kind or 'another failure'})"
    return None


def _settle(session: Session, bisection: Bisection, decision: Decision | None) -> None:
    good_run_id, bad_run_id = bisection.base_run_id, bisection.head_run_id
    state, note = BisectionState.PARTIAL, "not a range of nightlies"
    if decision is not None:
        by_night = {(p.night, p.result): p.run_id for p in bisection.probes if p.run_id}
        good_run_id = by_night.get((decision.good, ProbeResult.GREEN), good_run_id) or good_run_id
        bad_run_id = by_night.get((decision.bad, ProbeResult.RED), bad_run_id) or bad_run_id
        state = decision.state
        note = f"narrowed to {decision.good} (green) .. {decision.bad} (red)"
        if decision.skipped:
            note += "; skipped: " + ", ".join(n.isoformat() for n in decision.skipped)
    commands.settle(session, bisection, state, good_run_id=good_run_id, bad_run_id=bad_run_id,
                    note=note)
    session.flush()
    # The red run's range is the narrowed one now (queries.regression reads the bisection).
    head = session.get_one(Run, bisection.head_run_id)
    breakage = session.get_one(Breakage, bisection.breakage_id)
    culprits.narrowed(session, breakage, range_for(session, head), f"bisection: {note}")
