"""Flaky tests: each test's flakiness over a backend's last N runs, and what is quarantined.

Bounded reads: the window is N run ids per backend (an indexed walk of runs), and only the
tests that did not pass at least once in it are read in full.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.domain.flaky import NOT_PASSED, FlakeStat, Observation, assess
from service.models import Backend, Quarantine, Run, TestResult


@dataclass(frozen=True)
class QuarantineRow:
    backend: str
    nodeid: str
    reason: str
    by: str
    rate: float | None
    since: dt.datetime
    clean_runs: int


@dataclass(frozen=True)
class FlakyRow:
    backend: str
    nodeid: str
    stat: FlakeStat
    quarantine: QuarantineRow | None


def window(session: Session, backend_id: int, size: int, *, upto: int | None = None) -> list[int]:
    """The backend's last ``size`` run ids (up to run ``upto``), newest first."""
    stmt = select(Run.id).where(Run.backend_id == backend_id).order_by(Run.id.desc()).limit(size)
    if upto is not None:
        stmt = stmt.where(Run.id <= upto)
    return list(session.scalars(stmt))


def stats(
    session: Session, run_ids: list[int], nodeids: Iterable[str] | None = None
) -> dict[str, FlakeStat]:
    """Each test's flakiness over ``run_ids``: the tests named, or every test that did not
    pass at least once there."""
    if not run_ids:
        return {}
    wanted = set(nodeids) if nodeids is not None else set(session.scalars(
        select(TestResult.nodeid).distinct()
        .where(TestResult.run_id.in_(run_ids), TestResult.outcome.in_(NOT_PASSED))))
    if not wanted:
        return {}
    rows = session.execute(
        select(TestResult.nodeid, TestResult.run_id, TestResult.outcome, Run.torch_build_id,
               Run.torch_spec, Run.backend_sha)
        .join(Run, Run.id == TestResult.run_id)
        .where(TestResult.run_id.in_(run_ids), TestResult.nodeid.in_(wanted)))
    seen: dict[str, list[Observation]] = defaultdict(list)
    for nodeid, run_id, outcome, build_id, spec, sha in rows:
        seen[nodeid].append(Observation(run_id, (build_id or spec, sha), outcome))
    return {nodeid: assess(obs) for nodeid, obs in seen.items()}


def quarantines(session: Session, backend: str | None = None) -> list[QuarantineRow]:
    stmt = (select(Quarantine, Backend.name).join(Backend, Backend.id == Quarantine.backend_id)
            .order_by(Backend.name, Quarantine.nodeid))
    if backend:
        stmt = stmt.where(Backend.name == backend)
    return [QuarantineRow(name, q.nodeid, q.reason, q.by, q.rate, q.since, q.clean_runs)
            for q, name in session.execute(stmt)]


def quarantined_nodeids(session: Session, backend_id: int) -> set[str]:
    return set(session.scalars(select(Quarantine.nodeid)
                               .where(Quarantine.backend_id == backend_id)))


def flaky_tests(
    session: Session, size: int, *, backend: str | None = None
) -> list[FlakyRow]:
    """Every flaky or quarantined test, per backend, the flakiest first."""
    stmt = select(Backend.id, Backend.name).order_by(Backend.name)
    if backend:
        stmt = stmt.where(Backend.name == backend)
    held = {(q.backend, q.nodeid): q for q in quarantines(session, backend)}
    found: list[FlakyRow] = []
    for backend_id, name in session.execute(stmt).all():
        ids = window(session, backend_id, size)
        mine = {n for b, n in held if b == name}
        measured = stats(session, ids)
        measured.update(stats(session, ids, mine - set(measured)))
        for nodeid, stat in measured.items():
            q = held.get((name, nodeid))
            if stat.flaky or q is not None:
                found.append(FlakyRow(name, nodeid, stat, q))
        for nodeid in mine - set(measured):  # quarantined, not seen in the window
            found.append(FlakyRow(name, nodeid, FlakeStat(0, 0, False, ""), held[(name, nodeid)]))
    found.sort(key=lambda r: (-r.stat.rate, r.backend, r.nodeid))
    return found
