from __future__ import annotations

from sqlalchemy import inspect

from service.db import make_engine
from service.migrate import downgrade, upgrade
from service.models import Base


def test_upgrade_downgrade_upgrade_matches_models(db_url: str) -> None:
    engine = make_engine(db_url)
    upgrade(engine)
    tables = set(inspect(engine).get_table_names())
    assert set(Base.metadata.tables) <= tables
    downgrade(engine, "base")
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    upgrade(engine)
    assert set(Base.metadata.tables) <= set(inspect(engine).get_table_names())
    engine.dispose()


def test_models_and_migrations_agree(db_url: str) -> None:
    """A model change without a migration fails here (autogenerate finds a diff)."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    engine = make_engine(db_url)
    upgrade(engine)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    # Column changes come as lists of ("modify_*", ...) tuples. UTCDateTime is a
    # TypeDecorator over DateTime(timezone=True): its type "change" is not a real difference.
    flat = [op for d in diff for op in (d if isinstance(d, list) else [d])]
    real = [op for op in flat if op[0] != "modify_type"]
    assert real == []
