"""Alembic environment: the URL comes from the caller (service.migrate) or the settings."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from service.models import Base

target_metadata = Base.metadata


def _configure_and_run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite needs batch ALTERs
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _configure_and_run(connection)
        return
    from service.config import get_settings
    from service.db import make_engine

    engine = make_engine(context.config.get_main_option("sqlalchemy.url") or get_settings().resolved_database_url)
    with engine.connect() as conn:
        _configure_and_run(conn)
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; run `ootci migrate`")
run_migrations_online()
