"""The storage mask (service/models/masked.py): what a run's text carries of the process's
secrets is hidden at the write, whatever writes it (ORM flush, Core insert, Core update),
on SQLite and Postgres. The rows are read back with plain SQL, as the database holds them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text, update
from sqlalchemy.orm import Session

from service import secrets
from service.commands import outbox
from service.config import Settings, load_settings
from service.db import make_engine
from service.migrate import upgrade
from service.models import Failure, OutboxKind, OutboxMessage, TestResult
from tests.support.factories import make_backend, make_run

TOKEN = "tok-storage-3b8e1d"
URL = "postgresql://ootci:Pw-In-A-Url-77@db.internal/ootci"


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    upgrade(engine)
    yield engine
    engine.dispose()


def _raw(engine: Engine, sql: str) -> str:
    with engine.connect() as conn:
        return repr(conn.execute(text(sql)).all())


def test_orm_core_insert_and_core_update_all_pass_the_mask(engine: Engine) -> None:
    secrets.remember(TOKEN)
    with Session(engine) as s:
        run = make_run(s, make_backend(s))
        s.add(TestResult(run_id=run.id, nodeid=f"t.py::test[{TOKEN}]", suite="t.py",
                         outcome="failed", message=f"saw {TOKEN} and {URL}"))
        s.add(Failure(run_id=run.id, step_name="test", stage="test", line=f"E {TOKEN}",
                      captures={TOKEN: [f"{URL}"]}, consequences=[{"message": TOKEN}]))
        outbox.enqueue(s, kind=OutboxKind.STATUS, target="a" * 40, dedupe_key="k1",
                       payload={"description": f"failed: {TOKEN}"})
        s.flush()
        s.execute(update(OutboxMessage).values(last_error=f"HTTP 500 echoing {TOKEN}"))
        s.commit()
    stored = _raw(engine, "select * from test_results") + _raw(engine, "select * from failures") \
        + _raw(engine, "select * from outbox")
    assert TOKEN not in stored and "Pw-In-A-Url-77" not in stored
    assert "t.py::test[***]" in stored and "postgresql://ootci:***@db.internal" in stored
    assert "failed: ***" in stored and "HTTP 500 echoing ***" in stored
    # A lookup by the text as the run wrote it finds the masked row: the same mask applies.
    with Session(engine) as s:
        assert s.query(TestResult).filter_by(nodeid=f"t.py::test[{TOKEN}]").count() == 1


def test_secrets_of_loaded_settings_are_masked_and_short_values_are_not(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OOTCI_GITHUB_TOKEN", "ghp_fromSettings42")
    monkeypatch.setenv("OOTCI_API_TOKEN", "abc")  # too short to mask ordinary words
    load_settings()
    with Session(engine) as s:
        run = make_run(s, make_backend(s), error="GitHub refused ghp_fromSettings42 at abc")
        s.commit()
        run_id = run.id
    assert "GitHub refused *** at abc" in _raw(engine, f"select error from runs where id={run_id}")


def test_the_file_wins_over_the_variable_and_is_stripped(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text("from-the-file\n")
    held = secrets.read_secrets({"OOTCI_GITHUB_TOKEN": "from-the-env",
                                 "OOTCI_GITHUB_TOKEN_FILE": str(secret),
                                 "OOTCI_API_TOKEN": "api-from-env"})
    assert held == {"github_token": "from-the-file", "api_token": "api-from-env"}


def test_held_secrets_make_the_settings_once_the_environment_is_clean(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "hooks").write_text('{"acme/torch-acme": "repo-secret-1"}')
    monkeypatch.setenv("OOTCI_WEBHOOK_SECRETS_FILE", str(tmp_path / "hooks"))
    monkeypatch.setenv("OOTCI_API_TOKEN", "api-held-9")
    monkeypatch.setenv("SOME_VENDOR_TOKEN", "vendor-token-5")
    monkeypatch.setenv("HF_HUB_DISABLE_TOKEN", "true")  # a flag, not a credential
    environ = dict(os.environ)
    removed = secrets.load_and_scrub(environ)
    assert removed == ["OOTCI_API_TOKEN"]
    # A path is no secret; another tool's credential stays for the tools ootci runs itself.
    assert "OOTCI_WEBHOOK_SECRETS_FILE" in environ and "SOME_VENDOR_TOKEN" in environ
    settings = Settings(**secrets.held_settings())
    assert settings.api_token.get_secret_value() == "api-held-9"
    assert settings.webhook_secrets["acme/torch-acme"].get_secret_value() == "repo-secret-1"
    assert secrets.storage_mask("vendor-token-5 repo-secret-1 true") == "*** *** true"
