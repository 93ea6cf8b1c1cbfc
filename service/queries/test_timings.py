"""How long each of a backend's test files took last time: the weights that split its next
suite over processes and shards so that they finish together."""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.models import Run, TestResult


def seconds_per_file(session: Session, run: Run) -> dict[str, float]:
    """Test file (as pytest names it, relative to its rootdir) -> summed test seconds, from
    the backend's latest earlier run that recorded tests; {} when it has none. Process
    start and collection are not in it: they cost each part about the same."""
    earlier = session.scalar(
        select(func.max(TestResult.run_id))
        .join(Run, Run.id == TestResult.run_id)
        .where(Run.backend_id == run.backend_id, Run.id < run.id)
    )
    if earlier is None:
        return {}
    seconds: dict[str, float] = defaultdict(float)
    rows = session.execute(
        select(TestResult.nodeid, TestResult.duration_s).where(TestResult.run_id == earlier)
    )
    for nodeid, duration in rows:
        seconds[nodeid.split("::", 1)[0]] += duration or 0.0
    return dict(seconds)
