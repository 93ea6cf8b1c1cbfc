"""The start-up check that lets ``ootci`` skip alembic: it must agree with alembic on what
the head is, and say "at head" only for a database exactly there."""

from __future__ import annotations

from pathlib import Path

from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from service.db import make_engine
from service.migrate import alembic_config, at_head, downgrade, script_heads, upgrade


def _sqlite(tmp_path: Path) -> Engine:
    return make_engine(f"sqlite:///{tmp_path / 'ootci.db'}")


def test_the_heads_read_from_the_files_are_alembics(tmp_path: Path) -> None:
    engine = _sqlite(tmp_path)
    alembics = ScriptDirectory.from_config(alembic_config(engine)).get_heads()
    assert script_heads() == frozenset(alembics)


def test_at_head_only_at_the_head(tmp_path: Path) -> None:
    engine = _sqlite(tmp_path)
    assert not at_head(engine)  # no schema at all
    upgrade(engine)
    assert at_head(engine)
    downgrade(engine, "-1")
    assert not at_head(engine)  # one migration behind: upgrade must run
    upgrade(engine)
    assert at_head(engine)
    engine.dispose()
