"""Search: failures and tests whose text matches what the user typed.

Every function takes a session, never commits, and bounds what it reads: the pages must
stay fast with tens of thousands of runs and millions of test results, so each query is
either keyed by an index (run ids, nodeid, primary keys) or limited.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import Text, cast, func, or_, select
from sqlalchemy.orm import Session

from service.models import (
    Backend,
    Breakage,
    Failure,
    Run,
)
from service.queries.tests import known_nodeids, like_pattern


@dataclass(frozen=True)
class FailureHit:
    failure_id: int
    run_id: int
    backend: str
    stage: str
    category: str | None  # the triaged category (the failure's verdict), not the rule's
    subtype: str | None
    nodeid: str | None
    line: str
    created_at: dt.datetime


@dataclass(frozen=True)
class SearchResults:
    query: str
    tests: list[str]
    failures: list[FailureHit]
    breakages: list[Breakage]
    limit: int


def search(session: Session, q: str, *, limit: int = 50) -> SearchResults:
    """Case-insensitive substring search (LIKE/ILIKE, user wildcards escaped).

    Tests: distinct nodeids via the index walk above. Failures and breakages: newest first
    by primary key with LIMIT, so a common term stops after ``limit`` hits; a rare one scans
    the failures table, which holds one row per classified failure (thousands, not the
    millions of test results). Symbols and headers are found through ``captures``."""
    q = q.strip()
    pattern = like_pattern(q)
    tests = known_nodeids(session, q, limit=limit)
    failure_rows = session.execute(
        select(
            Failure.id,
            Failure.run_id,
            Backend.name,
            Failure.stage,
            Failure.triage,
            Failure.subtype,
            Failure.nodeid,
            func.substr(Failure.line, 1, 300),
            Run.created_at,
        )
        .join(Run, Run.id == Failure.run_id)
        .join(Backend, Backend.id == Run.backend_id)
        .where(
            or_(
                func.lower(Failure.line).like(pattern, escape="\\"),
                func.lower(cast(Failure.captures, Text)).like(pattern, escape="\\"),
                func.lower(Failure.nodeid).like(pattern, escape="\\"),
            )
        )
        .order_by(Failure.id.desc())
        .limit(limit)
    )
    breakages = list(
        session.scalars(
            select(Breakage)
            .where(
                or_(
                    func.lower(Breakage.title).like(pattern, escape="\\"),
                    func.lower(cast(Breakage.captures, Text)).like(pattern, escape="\\"),
                )
            )
            .order_by(Breakage.id.desc())
            .limit(limit)
        )
    )
    return SearchResults(
        query=q,
        tests=tests,
        failures=[FailureHit(*row) for row in failure_rows],
        breakages=breakages,
        limit=limit,
    )
