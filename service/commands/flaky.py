"""Quarantine: put a test in (a person, or the flakiness rate), and take it out (a person,
or K clean runs in a row). Every change is audited; nothing commits here."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.commands.audit import audit
from service.domain.flaky import FlakeStat, is_clean, should_quarantine
from service.domain.states import Outcome
from service.models import Backend, Quarantine

AUTO_ACTOR = "ootci:flaky"


class FlakyError(ValueError):
    """Bad input for a quarantine command; one line for the user."""


def _backend(session: Session, name: str) -> Backend:
    found = session.scalar(select(Backend).where(Backend.name == name))
    if found is None:
        raise FlakyError(f"backend {name!r} is not registered")
    return found


def _held(session: Session, backend_id: int, nodeid: str) -> Quarantine | None:
    return session.scalar(select(Quarantine).where(Quarantine.backend_id == backend_id,
                                                   Quarantine.nodeid == nodeid))


def quarantine(session: Session, backend: str, nodeid: str, *, actor: str) -> Quarantine:
    nodeid = nodeid.strip()
    if not nodeid or len(nodeid) > 1000 or "\x00" in nodeid:
        raise FlakyError("a test's node id is 1 to 1000 characters, e.g. tests/test_x.py::test_y")
    b = _backend(session, backend)
    if _held(session, b.id, nodeid) is not None:
        raise FlakyError(f"{nodeid} is already quarantined on {backend}")
    q = Quarantine(backend_id=b.id, nodeid=nodeid, reason="manual", by=actor, clean_runs=0)
    session.add(q)
    audit(session, actor, "flaky.quarantine", f"test:{backend}:{nodeid}")
    return q


def release(session: Session, backend: str, nodeid: str, *, actor: str) -> None:
    b = _backend(session, backend)
    q = _held(session, b.id, nodeid)
    if q is None:
        raise FlakyError(f"{nodeid} is not quarantined on {backend}")
    session.delete(q)
    audit(session, actor, "flaky.release", f"test:{backend}:{nodeid}", {"by": "person"})


def after_run(
    session: Session,
    backend: Backend,
    outcomes: Mapping[str, str],
    measured: Mapping[str, FlakeStat],
    *,
    threshold: float,
    release_after: int,
) -> tuple[list[str], list[str]]:
    """A run's tests against the quarantine: a test that did not pass now, flaky at or
    above ``threshold``, goes in; a quarantined one counts its clean runs in a row (a
    failure starts over) and leaves after ``release_after``. Returns (quarantined,
    released) node ids."""
    held = {q.nodeid: q for q in session.scalars(
        select(Quarantine).where(Quarantine.backend_id == backend.id))}
    added, released = [], []
    for nodeid, outcome in outcomes.items():
        q = held.get(nodeid)
        if q is not None:
            if is_clean(outcome):
                q.clean_runs += 1
                if q.clean_runs >= release_after:
                    session.delete(q)
                    released.append(nodeid)
                    audit(session, AUTO_ACTOR, "flaky.release", f"test:{backend.name}:{nodeid}",
                          {"clean_runs": q.clean_runs})
            elif outcome != Outcome.SKIPPED:
                q.clean_runs = 0
            continue
        stat = measured.get(nodeid)
        if is_clean(outcome) or stat is None or not should_quarantine(stat, threshold):
            continue
        session.add(Quarantine(backend_id=backend.id, nodeid=nodeid, reason="auto",
                               by=AUTO_ACTOR, rate=stat.rate, clean_runs=0))
        added.append(nodeid)
        audit(session, AUTO_ACTOR, "flaky.quarantine", f"test:{backend.name}:{nodeid}",
              {"rate": round(stat.rate, 3), "runs": stat.runs, "why": stat.reason})
    return added, released
