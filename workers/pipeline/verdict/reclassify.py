"""``ootci reclassify``: replay classification, triage and breakage grouping over stored
runs after the rules (or the fingerprint algorithm) changed.

Runs are replayed oldest first through the same ``collect`` the pipeline uses, from what
the database holds (step logs, test results), so a reclassified history is exactly what
the pipeline would have stored had the new rules been there from the start. Node ids
stored with a run tree's location in front are re-keyed first (``stable_nodeid``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from service.config import Settings
from service.domain.nodeids import stable_nodeid
from service.domain.states import Outcome, StepStatus
from service.domain.triage import IsolationResult
from service.models import Breakage, Failure, Run, RunState, Step, StepName, TestResult
from workers.pipeline.steps.outcome import StepOutcome
from workers.pipeline.testrun.records import TestRecord, TestRunOutcome
from workers.pipeline.verdict.collect import conclude, retriage, triage_failures


@dataclass
class ReclassifyReport:
    runs: int = 0
    failures_before: int = 0
    failures_after: int = 0
    changed: int = 0  # failures whose (category, subtype, fingerprint) changed
    breakages_before: int = 0
    breakages_after: int = 0


def _outcome(step: Step | None) -> StepOutcome | None:
    if step is None:
        return None
    status = StepStatus(step.status) if step.status in StepStatus.ENDED else StepStatus.ERRORED
    return StepOutcome(status=status, exit_code=step.exit_code, summary=step.summary or "")


def _replay_inputs(run: Run) -> tuple[StepOutcome, TestRunOutcome | None] | None:
    steps = {s.name: s for s in run.steps}
    build = _outcome(steps.get(StepName.BUILD))
    if build is None:
        return None  # never got to build (provisioning failed): nothing to reclassify
    test_step = _outcome(steps.get(StepName.TEST))
    tests = None
    if test_step is not None:
        tests = TestRunOutcome(
            step=test_step,
            results=tuple(
                TestRecord(t.nodeid, Outcome(t.outcome), t.duration_s, t.message, t.details)
                for t in run.test_results
            ),
        )
    return build, tests


def _rekey_test_results(session: Session) -> None:
    """Node ids stored with a run tree's location in front (before the test step pinned
    pytest's rootdir) become the test's own: the replay then groups them with the runs
    since, and the failures it makes carry the stable ids."""
    for result in session.scalars(select(TestResult).where(TestResult.nodeid.like("%sources/%"))):
        stable = stable_nodeid(result.nodeid)
        if stable != result.nodeid:
            result.nodeid = stable
    session.flush()


def reclassify(
    session: Session, settings: Settings, *, progress: Callable[[int, int], None] | None = None
) -> ReclassifyReport:
    report = ReclassifyReport()
    before = {
        (f.run_id, f.nodeid, f.step_name): (f.category, f.subtype, f.fingerprint)
        for f in session.scalars(select(Failure))
    }
    report.failures_before = len(before)
    report.breakages_before = len(session.scalars(select(Breakage.id)).all())
    _rekey_test_results(session)
    # The isolating runs' answers are experiments, not replayable from logs: kept per
    # failure and handed back to the triage of the same failure.
    isolations = {
        (f.run_id, f.step_name, stable_nodeid(f.nodeid) if f.nodeid else None): f.isolation
        for f in session.scalars(select(Failure).where(Failure.isolation.is_not(None)))
    }
    session.execute(update(Failure).values(breakage_id=None))
    session.execute(delete(Failure))
    session.execute(delete(Breakage))
    session.flush()

    finished = (RunState.PASSED, RunState.FAILED, RunState.ERRORED)
    run_ids = list(session.scalars(select(Run.id).where(Run.state.in_(finished)).order_by(Run.id)))
    for i, run_id in enumerate(run_ids, 1):
        run = session.get_one(Run, run_id)
        inputs = _replay_inputs(run)
        if inputs is not None:
            triaged = triage_failures(session, run, inputs[0], inputs[1])
            kept = {
                i: IsolationResult.from_dict(stored) for i, t in enumerate(triaged)
                if (stored := isolations.get((run.id, t.failure.step_name, t.failure.nodeid)))
            }
            conclude(session, run, retriage(triaged, kept), inputs[0], inputs[1], settings,
                     lambda _text: None, update_quarantine=False)
            report.runs += 1
        if progress:
            progress(i, len(run_ids))
    session.flush()
    after = {
        (f.run_id, f.nodeid, f.step_name): (f.category, f.subtype, f.fingerprint)
        for f in session.scalars(select(Failure))
    }
    report.failures_after = len(after)
    report.changed = sum(1 for k, v in after.items() if before.get(k) != v)
    report.breakages_after = len(session.scalars(select(Breakage.id)).all())
    return report
