"""Schema migrations, run programmatically (``ootci migrate``, tests, and before any run)."""

from __future__ import annotations

import fcntl
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

if TYPE_CHECKING:
    from alembic.config import Config

ROOT = Path(__file__).resolve().parent.parent
VERSIONS = ROOT / "migrations" / "versions"
_REVISION = re.compile(r"""^revision(?:: [\w\[\], |]+)? = ["']([^"']+)["']$""", re.M)
_DOWN = re.compile(r"""^down_revision(?:: [\w\[\], |]+)? = (None|["'][^"']+["'])$""", re.M)


def script_heads() -> frozenset[str] | None:
    """The head revisions of ``migrations/versions`` read straight from its files (no
    alembic: importing it and its script directory is a good part of every ``ootci run``'s
    start-up); None when a file is not the plain one-parent form this reads."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in VERSIONS.glob("*.py"):
        source = path.read_text(encoding="utf-8")
        revision, down = _REVISION.findall(source), _DOWN.findall(source)
        if len(revision) != 1 or len(down) != 1:
            return None
        revisions.add(revision[0])
        if down[0] != "None":
            parents.add(down[0].strip("\"'"))
    return frozenset(revisions - parents) or None


def at_head(engine: Engine) -> bool:
    """Whether the database's schema is exactly at the scripts' head(s): then there is
    nothing for ``upgrade`` to do. Any doubt (no version table, a file this cannot read)
    answers False, and ``upgrade`` decides."""
    heads = script_heads()
    if heads is None:
        return False
    try:
        with engine.connect() as conn:
            current = frozenset(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())
    except SQLAlchemyError:
        return False
    return current == heads


def alembic_config(engine: Engine) -> Config:
    from alembic.config import Config

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
        from alembic import command

        command.upgrade(cfg, revision)


def downgrade(engine: Engine, revision: str) -> None:
    from alembic import command

    cfg = alembic_config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)
