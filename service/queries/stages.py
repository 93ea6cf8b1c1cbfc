"""The matrix's stage details: per run, its step statuses, classified failures and test
outcomes per suite (the dashboard's cells).

Every function takes a session, never commits, and bounds what it reads: the pages must
stay fast with tens of thousands of runs and millions of test results, so each query is
either keyed by an index (run ids, nodeid, primary keys) or limited.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.domain.triage_actions import is_snoozed
from service.models import (
    Breakage,
    Failure,
    Outcome,
    Step,
    TestResult,
    utcnow,
)


@dataclass
class StageFacts:
    """Per run: step statuses, classified failures, and test outcomes counted per suite."""

    steps: dict[int, dict[str, str]] = field(default_factory=lambda: defaultdict(dict))
    # Per run: (stage, triaged category, subtype, nodeid, line, the rule's category, muted:
    # its breakage is snoozed).
    failures: dict[
        int, list[tuple[str, str | None, str | None, str | None, str, str | None, bool]]
    ] = field(default_factory=lambda: defaultdict(list))
    suite_counts: dict[int, dict[str, dict[str, int]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(dict))
    )
    suite_of: dict[int, dict[str, str]] = field(default_factory=lambda: defaultdict(dict))

    def suites(self) -> list[str]:
        return sorted({s for per_run in self.suite_counts.values() for s in per_run})


def stage_facts(session: Session, run_ids: Collection[int]) -> StageFacts:
    """Four queries over ``run_ids`` (each uses the run_id index of its table)."""
    facts = StageFacts()
    if not run_ids:
        return facts
    ids = list(run_ids)
    attempt_of: dict[int, int] = {}
    for run_id, attempt, name, status in session.execute(
        select(Step.run_id, Step.attempt, Step.name, Step.status)
        .where(Step.run_id.in_(ids))
        .order_by(Step.attempt, Step.id)
    ):
        if attempt != attempt_of.get(run_id):  # only the current (newest) attempt counts
            attempt_of[run_id] = attempt
            facts.steps[run_id] = {}
        facts.steps[run_id][name] = status
    now = utcnow()
    for run_id, stage, triaged, subtype, nodeid, line, suggested, until, until_torch in \
            session.execute(
        select(
            Failure.run_id,
            Failure.stage,
            Failure.triage,
            Failure.subtype,
            Failure.nodeid,
            func.substr(Failure.line, 1, 200),
            Failure.category,
            Breakage.snoozed_until,
            Breakage.snoozed_until_torch,
        )
        .outerjoin(Breakage, Breakage.id == Failure.breakage_id)
        .where(Failure.run_id.in_(ids))
        .order_by(Failure.id)
    ):
        facts.failures[run_id].append((stage, triaged, subtype, nodeid, line or "", suggested,
                                       is_snoozed(until, until_torch, now)))
    for run_id, suite, outcome, n in session.execute(
        select(TestResult.run_id, TestResult.suite, TestResult.outcome, func.count())
        .where(TestResult.run_id.in_(ids))
        .group_by(TestResult.run_id, TestResult.suite, TestResult.outcome)
    ):
        facts.suite_counts[run_id][suite][outcome] = int(n)
    for run_id, nodeid, suite in session.execute(
        select(TestResult.run_id, TestResult.nodeid, TestResult.suite).where(
            TestResult.run_id.in_(ids), TestResult.outcome.in_(Outcome.FAILING)
        )
    ):
        facts.suite_of[run_id][nodeid] = suite
    return facts


def failed_results(session: Session, run_id: int, *, limit: int) -> list[TestResult]:
    """A run's failed, errored and crashed tests (the run_id index, then a filter)."""
    return list(session.scalars(
        select(TestResult)
        .where(TestResult.run_id == run_id, TestResult.outcome.in_(Outcome.FAILING))
        .order_by(TestResult.id)
        .limit(limit)
    ))
