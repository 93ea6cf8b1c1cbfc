"""Insert a row unless its unique key is taken, on SQLite and Postgres alike.

Several workers first-sight the same shared row at once (a new nightly's TorchBuild, a
backend, a breakage): select-then-insert lets all of them see nothing and all but one fail
on the unique constraint. ``INSERT ... ON CONFLICT DO NOTHING`` never fails; the callers
then re-read the row that won.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from service.models.base import Base


def insert_or_ignore(
    session: Session,
    model: type[Base],
    values: Mapping[str, Any],
    *,
    conflict_on: Sequence[str],
) -> int | None:
    """Insert ``values``; the new row's id, or None when a row with the same
    ``conflict_on`` columns already exists (this session's or another's)."""
    # The dialect's own module only: importing Postgres's (its asyncpg, psycopg and pg8000
    # drivers' modules come with it) costs a SQLite command line 0.1 s at every start.
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql as dialect
    else:
        from sqlalchemy.dialects import sqlite as dialect  # type: ignore[no-redef]
    statement = (
        dialect.insert(model)
        .values(**values)
        .on_conflict_do_nothing(index_elements=list(conflict_on))
        .returning(model.__table__.c.id)
    )
    added: int | None = session.execute(statement).scalar()
    return added
