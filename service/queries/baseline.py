"""Read-side history a triage decision needs: what the backend did before this run.

Pure queries over a session (no commits), kept apart from the pure triage rules in
``service.domain.triage`` so those stay I/O-free.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.models import Failure, Run, RunState


@dataclass(frozen=True)
class Baseline:
    """What the last comparable runs of the same backend looked like."""

    # The latest finished run on a pinned torch (the last-known-good PyTorch), if any.
    pin_run_id: int | None
    pin_fingerprints: frozenset[str]
    # The torch build of that pin run: equal to ours means torch did not change.
    pin_torch_build_id: int | None
    # The latest passed run of the backend on any torch before this run.
    last_green_run_id: int | None
    last_green_torch_build_id: int | None
    last_green_backend_sha: str | None


def baseline_for(session: Session, run: Run, pins: list[str]) -> Baseline:
    pin_run = session.scalar(
        select(Run)
        .where(
            Run.backend_id == run.backend_id,
            Run.id != run.id,
            Run.id < run.id,
            Run.torch_spec.in_(pins),
            Run.state.in_(RunState.CONCLUSIVE),
        )
        .order_by(Run.id.desc())
        .limit(1)
    )
    fingerprints: frozenset[str] = frozenset()
    if pin_run is not None:
        fingerprints = frozenset(
            fp
            for fp in session.scalars(
                select(Failure.fingerprint).where(Failure.run_id == pin_run.id)
            )
            if fp
        )
    green = session.scalar(
        select(Run)
        .where(Run.backend_id == run.backend_id, Run.id < run.id, Run.state == RunState.PASSED)
        .order_by(Run.id.desc())
        .limit(1)
    )
    return Baseline(
        pin_run_id=pin_run.id if pin_run else None,
        pin_fingerprints=fingerprints,
        pin_torch_build_id=pin_run.torch_build_id if pin_run else None,
        last_green_run_id=green.id if green else None,
        last_green_torch_build_id=green.torch_build_id if green else None,
        last_green_backend_sha=green.backend_sha if green else None,
    )
