"""`ootci token` and `ootci flaky` as a user runs them: a token printed once and usable
against the API, list without secrets, revoke; bad input one line, exit 2, nothing written;
every write in the audit log as cli:user@host."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from service.api.app import create_app
from service.config import Settings
from service.db import make_engine, session_scope
from service.models import ApiToken, AuditEntry, Quarantine
from tests.support.cli import ootci
from tests.support.factories import make_backend
from tests.support.helpers import RecordingDispatcher


def engine_of(tmp_path: Path):  # type: ignore[no-untyped-def]
    return make_engine(f"sqlite:///{tmp_path / 'home' / 'ootci.db'}")


def test_token_add_prints_it_once_it_works_and_revoke_ends_it(tmp_path: Path) -> None:
    made = ootci(tmp_path, "token", "add", "alice", "--role", "triager")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("ootci_") and "shown once" in made.stderr
    listed = ootci(tmp_path, "token", "list")
    assert "alice" in listed.stdout and "triager" in listed.stdout and token not in listed.stdout
    engine = engine_of(tmp_path)
    app = create_app(Settings(home=tmp_path / "home"), dispatcher=RecordingDispatcher(),
                     engine=engine)
    with TestClient(app) as c:
        me = {"Authorization": f"Bearer {token}"}
        # Authenticated as alice: the route answers (an unknown backend), not 401.
        assert c.post("/api/flaky/quarantine", json={"backend": "x", "nodeid": "t"},
                      headers=me).status_code == 422
        assert ootci(tmp_path, "token", "revoke", "alice").returncode == 0
        assert c.post("/api/flaky/quarantine", json={"backend": "x", "nodeid": "t"},
                      headers=me).status_code == 401
    with session_scope(engine) as s:
        actions = [(e.action, e.actor.startswith("cli:") and "@" in e.actor)
                   for e in s.scalars(select(AuditEntry).order_by(AuditEntry.id))]
    assert actions == [("token.add", True), ("token.revoke", True)]


def test_bad_token_input_is_one_line_exit_2_and_nothing_written(tmp_path: Path) -> None:
    for args, says in ((("alice", "--role", "god"), "unknown role 'god'"),
                       (("no spaces",), "bad token name")):
        bad = ootci(tmp_path, "token", "add", *args)
        assert bad.returncode == 2 and says in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1
    again = ootci(tmp_path, "token", "revoke", "nobody")
    assert again.returncode == 2 and "no token named 'nobody'" in again.stderr
    with session_scope(engine_of(tmp_path)) as s:
        assert s.scalar(select(func.count()).select_from(ApiToken)) == 0
        assert s.scalar(select(func.count()).select_from(AuditEntry)) == 0


def test_flaky_quarantine_and_release_by_hand(tmp_path: Path) -> None:
    assert ootci(tmp_path, "token", "list").returncode == 0  # migrates the database
    engine = engine_of(tmp_path)
    with session_scope(engine) as s:
        make_backend(s, "acme")
    put = ootci(tmp_path, "flaky", "quarantine", "acme", "tests/t.py::test_x")
    assert put.returncode == 0, put.stderr
    unknown = ootci(tmp_path, "flaky", "quarantine", "nope", "tests/t.py::test_x")
    assert unknown.returncode == 2 and "backend 'nope' is not registered" in unknown.stderr
    listed = ootci(tmp_path, "flaky", "list", "--json")
    assert '"nodeid": "tests/t.py::test_x"' in listed.stdout and '"manual"' in listed.stdout
    assert ootci(tmp_path, "flaky", "release", "acme", "tests/t.py::test_x").returncode == 0
    with session_scope(engine) as s:
        assert s.scalar(select(func.count()).select_from(Quarantine)) == 0
        assert [e.action for e in s.scalars(select(AuditEntry).order_by(AuditEntry.id))] == [
            "flaky.quarantine", "flaky.release"]


def test_notify_add_list_remove_and_bad_input(tmp_path: Path) -> None:
    assert ootci(tmp_path, "token", "list").returncode == 0  # migrates the database
    engine = engine_of(tmp_path)
    with session_scope(engine) as s:
        make_backend(s, "acme")
    for args, says in (
        (("nope", "--event", "resolved", "--chat", "https://c.example/h"),
         "backend 'nope' is not registered"),
        (("acme", "--event", "resolved,boom", "--chat", "https://c.example/h"),
         "unknown event 'boom'"),
        (("acme", "--event", "resolved", "--webhook", "ftp://x"), "not an http(s) URL"),
        (("acme", "--event", "resolved", "--chat", "https://c.example/h", "--digest", "daily"),
         "--digest daily is for --email"),
        (("acme", "--event", "resolved"), "give one receiver"),
    ):
        bad = ootci(tmp_path, "notify", "add", *args)
        assert bad.returncode == 2 and says in bad.stderr, bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1
    with session_scope(engine) as s:
        assert s.scalar(select(func.count()).select_from(AuditEntry)) == 0
    made = ootci(tmp_path, "notify", "add", "acme", "--event", "new-breakage,resolved",
                 "--webhook", "https://hooks.acme.example/ootci")
    assert made.returncode == 0, made.stderr
    assert "subscription 1" in made.stdout and "secret (shown once): " in made.stdout
    secret = made.stdout.split("secret (shown once): ")[1].strip()
    listed = ootci(tmp_path, "notify", "list")
    assert "hooks.acme.example" in listed.stdout and secret not in listed.stdout
    assert "/ootci" not in listed.stdout  # the URL's path may be a credential
    assert ootci(tmp_path, "notify", "remove", "1").returncode == 0
    gone = ootci(tmp_path, "notify", "remove", "1")
    assert gone.returncode == 2 and "no subscription 1" in gone.stderr
