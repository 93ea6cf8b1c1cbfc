"""Reads of nightly bisections: the active ones, what a probe looks for and what its run
showed, and one breakage's bisection with its probes' runs (for the API and the page)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.domain.bisect import BisectionState, ProbeFailure, Target
from service.models import Bisection, BisectionProbe, Breakage, Failure, Run, TorchBuild


def active(session: Session) -> list[Bisection]:
    return list(session.scalars(
        select(Bisection).where(Bisection.state == BisectionState.RUNNING).order_by(Bisection.id)
        # Two advancing jobs at once would both queue the same next probe: each takes the
        # bisections the other does not hold (a no-op on SQLite, which has one writer).
        .with_for_update(skip_locked=True)
    ))


def target(session: Session, bisection: Bisection) -> Target:
    """The breakage's failures on the red run it opened with: their fingerprints (and the
    breakage's own), node ids and the earliest stage they fail in."""
    breakage = session.get_one(Breakage, bisection.breakage_id)
    rows = session.execute(
        select(Failure.fingerprint, Failure.nodeid, Failure.stage).where(
            Failure.run_id == bisection.head_run_id, Failure.breakage_id == breakage.id)
    ).all()
    stages = [stage for _, _, stage in rows] or ["test"]
    order = ("provision", "build", "import", "test")
    return Target(
        fingerprints=frozenset({breakage.fingerprint, *(fp for fp, _, _ in rows if fp)}),
        # "<collection>", "<import torch>": records of no single test, matched by fingerprint.
        nodeids=frozenset(n for _, n, _ in rows if n and not n.startswith("<")),
        stage=min(stages, key=lambda s: order.index(s) if s in order else len(order)),
    )


def run_facts(session: Session, run_id: int) -> tuple[str, str | None, list[ProbeFailure]]:
    """A probe run's state, error kind and failures."""
    run = session.get_one(Run, run_id)
    failures = session.execute(
        select(Failure.fingerprint, Failure.nodeid, Failure.stage).where(Failure.run_id == run_id)
    ).all()
    return run.state, run.error_kind, [ProbeFailure(fp, n, s) for fp, n, s in failures]


@dataclass(frozen=True)
class ProbeView:
    probe: BisectionProbe
    run_state: str | None
    torch_version: str | None


@dataclass(frozen=True)
class BisectionView:
    bisection: Bisection
    probes: list[ProbeView]
    # The torch of the narrowed range's ends (version, git_version).
    good: tuple[str, str] | None
    bad: tuple[str, str] | None


def for_breakage(session: Session, breakage_id: int) -> BisectionView | None:
    bisection = session.scalar(select(Bisection).where(Bisection.breakage_id == breakage_id))
    if bisection is None:
        return None
    run_ids = {p.run_id for p in bisection.probes if p.run_id}
    run_ids |= {bisection.good_run_id, bisection.bad_run_id}
    rows = {
        run_id: (state, version, git_version)
        for run_id, state, version, git_version in session.execute(
            select(Run.id, Run.state, TorchBuild.version, TorchBuild.git_version)
            .outerjoin(TorchBuild, TorchBuild.id == Run.torch_build_id)
            .where(Run.id.in_(run_ids))
        )
    }

    def torch(run_id: int) -> tuple[str, str] | None:
        row = rows.get(run_id)
        return (row[1] or "", row[2] or "") if row and row[1] else None

    probes = [
        ProbeView(p, rows[p.run_id][0] if p.run_id in rows else None,
                  rows[p.run_id][1] if p.run_id in rows else None)
        for p in sorted(bisection.probes, key=lambda p: p.id)
    ]
    return BisectionView(bisection, probes, torch(bisection.good_run_id),
                         torch(bisection.bad_run_id))


def narrowed_ends(session: Session, head_run_id: int) -> tuple[Run, Run] | None:
    """(good run, bad run) of the finished bisection that started from ``head_run_id``."""
    bisection = session.scalar(
        select(Bisection).where(Bisection.head_run_id == head_run_id,
                                Bisection.state != BisectionState.RUNNING)
        .order_by(Bisection.id.desc()).limit(1)
    )
    if bisection is None:
        return None
    return session.get_one(Run, bisection.good_run_id), session.get_one(Run, bisection.bad_run_id)
