"""Schema migrations, run programmatically (``ootci migrate``, tests, and before any run)."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, text

ROOT = Path(__file__).resolve().parent.parent


def alembic_config(engine: Engine) -> Config:
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(ROOT / "migrations"))
    cfg.set_main_option(
        "sqlalchemy.url", engine.url.render_as_string(hide_password=False).replace("%", "%%")
    )
    return cfg


# Any constant: the key of the Postgres advisory lock migrations hold.
_MIGRATION_LOCK_KEY = 0x6F6F7463


@contextmanager
def _sqlite_file_lock(engine: Engine) -> Iterator[None]:
    """Held around the whole transaction: SQLite runs DDL outside it, so a second migrator
    must not start before the first has committed its version row."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        yield
        return
    with open(f"{database}.migrate-lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Processes starting together on a fresh database (eight ``ootci run`` at once) take
    turns: the first creates the schema, the others find it at head."""
    cfg = alembic_config(engine)
    with _sqlite_file_lock(engine), engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def downgrade(engine: Engine, revision: str) -> None:
    cfg = alembic_config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)
