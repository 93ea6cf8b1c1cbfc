"""Identities and roles (issue #30 item 1): named tokens authenticate API writes with their
role, a viewer is refused writes, the old OOTCI_API_TOKEN is admin, every write lands in the
audit log with who made it, and bad input leaves nothing half-written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select

from service.api.app import create_app
from service.commands.tokens import add_token, token_digest
from service.config import Settings
from service.db import session_scope
from service.models import ApiToken, AuditEntry, Run
from tests.support.factories import make_backend
from tests.support.helpers import RecordingDispatcher

ADMIN = "env-admin-t0ken"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def client(engine: Engine, tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(home=tmp_path / "home", api_token=ADMIN, default_torch="installed")
    with session_scope(engine) as s:
        make_backend(s, "acme")
    with TestClient(create_app(settings, dispatcher=RecordingDispatcher(), engine=engine)) as c:
        yield c


def made(engine: Engine, name: str, role: str) -> str:
    with session_scope(engine) as s:
        return add_token(s, name, role, actor="test").secret


def audit_rows(engine: Engine) -> list[tuple[str, str, str]]:
    with session_scope(engine) as s:
        return [(e.actor, e.action, e.target)
                for e in s.scalars(select(AuditEntry).order_by(AuditEntry.id))]


RUN = {"backend": "acme", "torch": "installed"}


def test_a_triager_token_writes_and_the_audit_log_names_it(client: TestClient,
                                                           engine: Engine) -> None:
    token = made(engine, "alice", "triager")
    resp = client.post("/api/runs", json=RUN, headers=bearer(token))
    assert resp.status_code == 202, resp.text
    run_id = resp.json()["run_id"]
    assert ("token:alice", "run.trigger", f"run:{run_id}") in audit_rows(engine)
    log = client.get("/api/audit").json()
    assert log[0]["actor"] == "token:alice" and log[0]["detail"]["backend"] == "acme"


def test_a_viewer_token_is_refused_writes_with_403_and_nothing_is_written(
    client: TestClient, engine: Engine
) -> None:
    token = made(engine, "vic", "viewer")
    resp = client.post("/api/runs", json=RUN, headers=bearer(token))
    assert resp.status_code == 403
    assert "viewer" in resp.json()["detail"] and "triager" in resp.json()["detail"]
    with session_scope(engine) as s:
        assert s.scalar(select(func.count()).select_from(Run)) == 0
    assert [a for _, a, _ in audit_rows(engine)] == ["token.add"]


def test_unknown_and_revoked_tokens_are_401(client: TestClient, engine: Engine) -> None:
    token = made(engine, "bob", "admin")
    assert client.post("/api/runs", json=RUN, headers=bearer("ootci_nope")).status_code == 401
    assert client.delete("/api/tokens/bob", headers=bearer(token)).status_code == 204
    assert client.post("/api/runs", json=RUN, headers=bearer(token)).status_code == 401


def test_the_old_single_token_is_admin_and_manages_tokens(client: TestClient,
                                                         engine: Engine) -> None:
    resp = client.post("/api/tokens", json={"name": "carol", "role": "triager"},
                       headers=bearer(ADMIN))
    assert resp.status_code == 201
    secret = resp.json()["token"]
    with session_scope(engine) as s:
        row = s.scalar(select(ApiToken).where(ApiToken.name == "carol"))
        assert row is not None
        # Only the hash is stored, never the token.
        assert row.token_sha256 == token_digest(secret) and secret not in row.token_sha256
    listed = client.get("/api/tokens", headers=bearer(ADMIN)).json()
    assert [t["name"] for t in listed] == ["carol"] and "token" not in listed[0]
    # A triager cannot make tokens.
    assert client.post("/api/tokens", json={"name": "eve", "role": "admin"},
                       headers=bearer(secret)).status_code == 403
    assert ("api-token", "token.add", "token:carol") in audit_rows(engine)


@pytest.mark.parametrize(("body", "says"), [
    ({"name": "x", "role": "god"}, "unknown role 'god'"),
    ({"name": "bad name!", "role": "viewer"}, "bad token name"),
])
def test_bad_token_input_is_one_clear_422_and_nothing_is_written(
    client: TestClient, engine: Engine, body: dict[str, str], says: str
) -> None:
    resp = client.post("/api/tokens", json=body, headers=bearer(ADMIN))
    assert resp.status_code == 422
    assert says in resp.json()["detail"] and "\n" not in resp.json()["detail"]
    with session_scope(engine) as s:
        assert s.scalar(select(func.count()).select_from(ApiToken)) == 0
        assert s.scalar(select(func.count()).select_from(AuditEntry)) == 0


def test_subscriptions_need_a_triager_and_never_list_the_secret(client: TestClient,
                                                                 engine: Engine) -> None:
    body = {"backend": "acme", "events": "new-breakage", "channel": "webhook",
            "target": "https://hooks.example/x"}
    viewer = made(engine, "vic", "viewer")
    assert client.post("/api/subscriptions", json=body, headers=bearer(viewer)).status_code == 403
    triager = made(engine, "tri", "triager")
    resp = client.post("/api/subscriptions", json=body, headers=bearer(triager))
    assert resp.status_code == 201 and resp.json()["secret"]
    assert resp.json()["secret"] not in client.get("/api/subscriptions").text
    bad = client.post("/api/subscriptions", json={**body, "backend": "nope"},
                      headers=bearer(triager))
    assert bad.status_code == 422 and bad.json()["detail"] == "backend 'nope' is not registered"
    assert ("token:tri", "notify.add", "subscription:1") in audit_rows(engine)
