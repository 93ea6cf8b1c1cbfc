"""Shared fixtures: real databases.

Postgres tests get a database of their own (created and dropped here), so several test
sessions on one server never see each other's rows.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from service.db import make_engine
from service.migrate import upgrade

POSTGRES_URL = os.environ.get(
    "OOTCI_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def _postgres_reachable() -> bool:
    try:
        engine = make_engine(POSTGRES_URL)
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
        return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def postgres_server_url() -> str:
    if not _postgres_reachable():
        if os.environ.get("CI"):
            pytest.fail(f"Postgres is required in CI and is not reachable at {POSTGRES_URL}")
        pytest.skip(f"Postgres not reachable at {POSTGRES_URL}")
    return POSTGRES_URL


def _create_database(server_url: str, template: str | None = None) -> str:
    name = f"ootci_t_{uuid.uuid4().hex[:12]}"
    admin = make_engine(server_url).execution_options(isolation_level="AUTOCOMMIT")
    copy_of = f' TEMPLATE "{template}"' if template else ""
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"{copy_of}'))
    admin.dispose()
    return name


def _drop_database(server_url: str, name: str) -> None:
    admin = make_engine(server_url).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _url_of(server_url: str, name: str) -> str:
    return server_url.rsplit("/", 1)[0] + f"/{name}"


def _migrate(url: str) -> None:
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()  # a template database must have no connections when it is copied


@pytest.fixture(scope="session")
def postgres_template(postgres_server_url: str) -> Iterator[str]:
    """One database migrated to head per session. A test's database is a copy of it
    (CREATE DATABASE ... TEMPLATE): the whole migration chain per test was most of the
    unit tests' time."""
    name = _create_database(postgres_server_url)
    try:
        _migrate(_url_of(postgres_server_url, name))
        yield name
    finally:
        _drop_database(postgres_server_url, name)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "ootci.db"
    _migrate(f"sqlite:///{path}")
    return path


@pytest.fixture
def fresh_postgres_url(postgres_server_url: str) -> Iterator[str]:
    """A URL to a brand-new empty Postgres database, dropped afterwards."""
    name = _create_database(postgres_server_url)
    try:
        yield _url_of(postgres_server_url, name)
    finally:
        _drop_database(postgres_server_url, name)


@pytest.fixture
def migrated_postgres_url(postgres_server_url: str, postgres_template: str) -> Iterator[str]:
    """A Postgres database of its own, already at the migrations' head, dropped afterwards."""
    name = _create_database(postgres_server_url, template=postgres_template)
    try:
        yield _url_of(postgres_server_url, name)
    finally:
        _drop_database(postgres_server_url, name)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ootci.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database (no schema), once on SQLite and once on Postgres: for the tests
    of the migrations themselves."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ootci.db'}"
    return str(request.getfixturevalue("fresh_postgres_url"))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database at the migrations' head; each test using this runs once on SQLite and
    once on Postgres."""
    if request.param == "sqlite":
        path = tmp_path / "ootci.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite:///{path}"
    return str(request.getfixturevalue("migrated_postgres_url"))


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    """A migrated engine on each database kind."""
    eng = make_engine(db_url)
    yield eng
    eng.dispose()


@pytest.fixture(autouse=True)
def _no_secrets_left_between_tests() -> Iterator[None]:
    """A CLI test scrubs its secrets into ``service.secrets`` (as a real process would):
    the next test plays another deployment."""
    yield
    from service import secrets

    secrets.forget()
