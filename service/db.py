"""Engine and session lifecycle.

One engine per process, created lazily: Celery forks workers, and a connection pool must
never cross a fork (``dispose_engine`` is called in the child). Sessions are opened at the
edges (request dependency, task scope, CLI command); query functions take a session and
never commit.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

_engines: dict[tuple[int, str], Engine] = {}


class DatabaseUnavailable(RuntimeError):
    """The configured database cannot be reached; the message says which and why."""


def make_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):  # type: ignore[no-untyped-def]
            # WAL lets the dashboard read while a run writes; FKs are off by default in SQLite.
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10)


def get_engine(url: str) -> Engine:
    """The process's engine for ``url`` (a new one after fork)."""
    key = (os.getpid(), url)
    engine = _engines.get(key)
    if engine is None:
        engine = _engines[key] = make_engine(url)
    return engine


def dispose_engines() -> None:
    for engine in _engines.values():
        engine.dispose(close=False)
    _engines.clear()


def check_connection(engine: Engine) -> None:
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except OperationalError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise DatabaseUnavailable(
            f"cannot reach database {engine.url.render_as_string(hide_password=True)}: {reason}"
        ) from None


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """A unit of work: commit on success, roll back on error."""
    session = Session(engine, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
