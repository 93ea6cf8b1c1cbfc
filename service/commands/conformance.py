"""Store a run's conformance results (one row per mechanism)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import delete
from sqlalchemy.orm import Session

from service.models import ConformanceResult


@dataclass(frozen=True)
class MechanismCounts:
    mechanism: str
    level: str
    passed: int
    failed: int
    skipped: int
    failing: tuple[str, ...]


def record_conformance(
    session: Session, run_id: int, device: str, results: Iterable[MechanismCounts]
) -> list[ConformanceResult]:
    """Replace the run's results (a retried attempt starts over)."""
    session.execute(delete(ConformanceResult).where(ConformanceResult.run_id == run_id))
    rows = [
        ConformanceResult(
            run_id=run_id, device=device, mechanism=r.mechanism, level=r.level,
            passed=r.passed, failed=r.failed, skipped=r.skipped, failing=list(r.failing),
        )
        for r in results
    ]
    session.add_all(rows)
    session.flush()
    return rows
