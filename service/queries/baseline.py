"""Read-side history a triage decision needs: for each failure of a run, what the backend's
earlier runs say about the same test or step.

Pure queries over a session (no commits), kept apart from the pure triage rules in
``service.domain.triage`` so those stay I/O-free. What each piece means is specified
there (``TriageEvidence``); here is how it is found.

A failure is keyed by what failed:

- a test, by node id: it passed in a run with a ``passed`` test result of that node id,
  and failed in one with a failed, errored or crashed one;
- a test module that did not import (an import-stage failure without ``::``): it passed in
  a run where a test of that file (its suite) passed, looked for in the backend's last
  ``MODULE_WINDOW`` runs (test results have no index by suite); it failed in a run with an
  error result of the module's node id;
- a conformance test (a node id in the run's ``conformance_results.failing``): by its
  mechanism, which passed in a run where it worked (some tests passed, none failed) and
  failed in one where some of its tests failed;
- a step without a test (provision, build): the step passed, or failed, in that run (any
  attempt); the test runner itself (a test-step failure without per-test evidence)
  passed in a run whose test step ran the suite to the end (passed or failed).

``history_for`` answers for all of a run's failures with a bounded number of queries,
whatever their count: per kind of key present, one for where each key last passed and one
for where it first failed after that (node ids in chunks of ``CHUNK``); one for the
identities of those runs; one for the earlier runs with the same fingerprints; and one for
the run's conformance results. Each is keyed by an index (run ids, node ids, fingerprints)
or by the backend's runs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, TypeVar

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from service.domain.experiments import EXPERIMENTS
from service.domain.states import Outcome, StepName, StepStatus
from service.domain.triage import RunIdentity, TorchIdentity, TriageEvidence
from service.domain.verdict import Category, Stage
from service.models import ConformanceResult, Failure, Run, Step, TestResult, TorchBuild

CHUNK = 200
MODULE_WINDOW = 100

# What an earlier run's failure must not be to count as "the same failure" there: a flake
# or the machine's trouble says nothing about the code.
_NOT_EVIDENCE = (Category.FLAKE.value, Category.INFRA.value)

Key = tuple[str, str]  # (kind, name): ("test", nodeid), ("step", "build"), ...

T = TypeVar("T")


def _chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    for at in range(0, len(items), size):
        yield items[at : at + size]


def _suite(module: str) -> str:
    return PurePosixPath(module).stem


def key_of(failure: Failure, mechanism_of: Mapping[str, str]) -> Key:
    """What failed, as the history looks it up (see the module docstring)."""
    nodeid = failure.nodeid
    if nodeid is None:
        if failure.step_name == StepName.TEST:
            return ("runner", StepName.TEST.value)
        return ("step", str(failure.step_name))
    if nodeid in mechanism_of:
        return ("mechanism", mechanism_of[nodeid])
    if failure.stage == Stage.IMPORT and "::" not in nodeid:
        return ("module", nodeid)
    return ("test", nodeid)


@dataclass
class History:
    """The history of one run's failures (``evidence`` hands one failure's to triage)."""

    this: RunIdentity
    mechanism_of: dict[str, str] = field(default_factory=dict)
    passed: dict[Key, RunIdentity] = field(default_factory=dict)
    broke: dict[Key, RunIdentity] = field(default_factory=dict)
    failed_before: dict[str, tuple[RunIdentity, ...]] = field(default_factory=dict)

    def evidence(self, failure: Failure, *, passed_on_rerun: bool = False) -> TriageEvidence:
        key = key_of(failure, self.mechanism_of)
        return TriageEvidence(
            this=self.this,
            passed=self.passed.get(key),
            broke=self.broke.get(key),
            failed_before=self.failed_before.get(failure.fingerprint or "", ()),
            passed_on_rerun=passed_on_rerun,
        )


def _identity(run_id: int, backend: str | None, version: str | None, git: str | None,
              sha256: str | None) -> RunIdentity:
    torch = TorchIdentity(version, git or "", sha256) if version is not None else None
    return RunIdentity(run_id, torch, backend)


def run_identity(run: Run) -> RunIdentity:
    tb = run.torch_build
    if tb is None:
        return RunIdentity(run.id, None, run.backend_sha)
    return _identity(run.id, run.backend_sha, tb.version, tb.git_version, tb.artifact_sha256)


def _identities(session: Session, run_ids: Collection[int]) -> dict[int, RunIdentity]:
    found: dict[int, RunIdentity] = {}
    for chunk in _chunks(sorted(run_ids)):
        for run_id, backend, version, git, sha256 in session.execute(
            select(Run.id, Run.backend_sha, TorchBuild.version, TorchBuild.git_version,
                   TorchBuild.artifact_sha256)
            .outerjoin(TorchBuild, TorchBuild.id == Run.torch_build_id)
            .where(Run.id.in_(chunk))
        ):
            found[run_id] = _identity(run_id, backend, version, git, sha256)
    return found


class _Lookup:
    """One kind of key: the column that names it, the run id column of its table, and how
    a row there says passed or failed."""

    def __init__(self, name: Any, run_id: Any, passed: Any, failed: Any | None,
                 window: Any | None = None) -> None:
        self.name, self.run_id = name, run_id
        self.passed_when, self.failed_when, self.window = passed, failed, window


def _earlier(run: Run, lookup: _Lookup) -> list[Any]:
    # Experiments (service/domain/experiments.py) are no history: a partial suite.
    where = [Run.backend_id == run.backend_id, lookup.run_id < run.id,
             Run.trigger.not_in(EXPERIMENTS)]
    if lookup.window is not None:
        where.append(lookup.run_id.in_(lookup.window))
    return where


def _last_passed(session: Session, run: Run, lookup: _Lookup, names: Sequence[str]
                 ) -> dict[str, int]:
    found: dict[str, int] = {}
    for chunk in _chunks(names):
        found.update((name, run_id) for name, run_id in session.execute(
            select(lookup.name, func.max(lookup.run_id))
            .join(Run, Run.id == lookup.run_id)
            .where(*_earlier(run, lookup), lookup.passed_when, lookup.name.in_(chunk))
            .group_by(lookup.name)
        ))
    return found


def _first_failed_after(session: Session, run: Run, lookup: _Lookup, after: Mapping[str, int]
                        ) -> dict[str, int]:
    """Per name, the first earlier run after ``after[name]`` where it failed."""
    if lookup.failed_when is None:
        return {}
    found: dict[str, int] = {}
    for chunk in _chunks(sorted(after.items())):
        found.update((name, run_id) for name, run_id in session.execute(
            select(lookup.name, func.min(lookup.run_id))
            .join(Run, Run.id == lookup.run_id)
            .where(
                Run.backend_id == run.backend_id, lookup.run_id < run.id, lookup.failed_when,
                lookup.name.in_([name for name, _ in chunk]),
                or_(*(and_(lookup.name == name, lookup.run_id > since) for name, since in chunk)),
            )
            .group_by(lookup.name)
        ))
    return found


def _lookups(run: Run) -> dict[str, _Lookup]:
    window = (
        select(Run.id).where(Run.backend_id == run.backend_id, Run.id < run.id,
                             Run.trigger.not_in(EXPERIMENTS))
        .order_by(Run.id.desc()).limit(MODULE_WINDOW)
    )
    worked = and_(ConformanceResult.passed > 0, ConformanceResult.failed == 0)
    return {
        "step": _Lookup(Step.name, Step.run_id, Step.status == StepStatus.PASSED,
                        Step.status == StepStatus.FAILED),
        "runner": _Lookup(Step.name, Step.run_id,
                          Step.status.in_([StepStatus.PASSED, StepStatus.FAILED]), None),
        "test": _Lookup(TestResult.nodeid, TestResult.run_id,
                        TestResult.outcome == Outcome.PASSED,
                        TestResult.outcome.in_(Outcome.FAILING)),
        "module": _Lookup(TestResult.suite, TestResult.run_id,
                          TestResult.outcome == Outcome.PASSED, None, window=window),
        "module-broke": _Lookup(TestResult.nodeid, TestResult.run_id,
                                TestResult.outcome == Outcome.PASSED,
                                TestResult.outcome.in_(Outcome.FAILING)),
        "mechanism": _Lookup(ConformanceResult.mechanism, ConformanceResult.run_id, worked,
                             ConformanceResult.failed > 0),
    }


def _mechanisms(session: Session, run: Run) -> dict[str, str]:
    """The run's failing conformance tests: node id -> mechanism."""
    return {
        str(nodeid): mechanism
        for mechanism, failing in session.execute(
            select(ConformanceResult.mechanism, ConformanceResult.failing)
            .where(ConformanceResult.run_id == run.id)
        )
        for nodeid in (failing or ())
    }


def _failed_before(session: Session, run: Run, fingerprints: Collection[str]
                   ) -> dict[str, tuple[RunIdentity, ...]]:
    """Per fingerprint, the earlier runs of the backend where it failed: the newest of each
    distinct (backend, torch) pair, newest first."""
    found: dict[str, list[RunIdentity]] = defaultdict(list)
    for chunk in _chunks(sorted(fingerprints)):
        rows = session.execute(
            select(Failure.fingerprint, Run.backend_sha, TorchBuild.version,
                   TorchBuild.git_version, TorchBuild.artifact_sha256, func.max(Run.id))
            .join(Run, Run.id == Failure.run_id)
            .outerjoin(TorchBuild, TorchBuild.id == Run.torch_build_id)
            .where(
                Run.backend_id == run.backend_id, Run.id < run.id,
                Run.trigger.not_in(EXPERIMENTS), Failure.fingerprint.in_(chunk),
                or_(Failure.triage.is_(None), Failure.triage.not_in(_NOT_EVIDENCE)),
            )
            .group_by(Failure.fingerprint, Run.backend_sha, TorchBuild.version,
                      TorchBuild.git_version, TorchBuild.artifact_sha256)
        )
        for fp, backend, version, git, sha256, run_id in rows:
            found[fp or ""].append(_identity(run_id, backend, version, git, sha256))
    return {fp: tuple(sorted(ids, key=lambda i: -i.run_id)) for fp, ids in found.items()}


def history_for(session: Session, run: Run, failures: Iterable[Failure]) -> History:
    """The history of ``failures`` (the run's, not stored yet or stored: only their keys
    and fingerprints are read) in the backend's runs before ``run``."""
    items = list(failures)
    history = History(this=run_identity(run))
    if not items:
        return history
    if any(f.nodeid is not None for f in items):
        history.mechanism_of = _mechanisms(session, run)
    by_kind: dict[str, set[str]] = defaultdict(set)
    for f in items:
        kind, name = key_of(f, history.mechanism_of)
        by_kind[kind].add(name)
    lookups = _lookups(run)
    passed: dict[Key, int] = {}
    broke: dict[Key, int] = {}
    for kind, names in by_kind.items():
        if kind == "module":
            suites = _last_passed(session, run, lookups[kind], sorted({_suite(n) for n in names}))
            last = {n: suites[_suite(n)] for n in names if _suite(n) in suites}
            first = _first_failed_after(session, run, lookups["module-broke"], last)
        else:
            last = _last_passed(session, run, lookups[kind], sorted(names))
            first = _first_failed_after(session, run, lookups[kind], last)
        passed.update(((kind, n), r) for n, r in last.items())
        broke.update(((kind, n), r) for n, r in first.items())
    identities = _identities(session, {*passed.values(), *broke.values()})
    history.passed = {k: identities[r] for k, r in passed.items() if r in identities}
    history.broke = {k: identities[r] for k, r in broke.items() if r in identities}
    fingerprints = {f.fingerprint for f in items if f.fingerprint}
    if fingerprints:
        history.failed_before = _failed_before(session, run, fingerprints)
    return history
