"""The triage actions' API (issue #30 item 2): a triager's token acts on a breakage and the
breakage's JSON shows it; a viewer is refused (403), no token is 401, an unknown breakage
404, bad input 422 with a clear detail, and a refused request writes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from service.api.app import create_app
from service.commands.tokens import add_token
from service.config import Settings
from service.db import session_scope
from service.models import AuditEntry, OutboxKind, OutboxMessage, RunState
from tests.support.factories import make_backend, make_breakage, make_run
from tests.support.helpers import RecordingDispatcher

SUSPECTS = [{"sha": "a" * 40, "pr": 101, "title": "moves Allocator", "score": 0.9, "reasons": []},
            {"sha": "b" * 40, "pr": 202, "title": "edits docs", "score": 0.3, "reasons": []}]


@pytest.fixture
def setup(engine: Engine, tmp_path: Path) -> Iterator[tuple[TestClient, dict[str, str], int]]:
    settings = Settings(home=tmp_path / "home", default_torch="installed")
    with session_scope(engine) as s:
        backend = make_backend(s, "acme")
        red = make_run(s, backend, state=RunState.FAILED, git="c" * 40)
        breakage_id = make_breakage(s, backend, red, culprits=SUSPECTS).id
        tokens = {role: {"Authorization": f"Bearer {add_token(s, role, role, actor='t').secret}"}
                  for role in ("viewer", "triager")}
    with TestClient(create_app(settings, dispatcher=RecordingDispatcher(), engine=engine)) as c:
        yield c, tokens, breakage_id


def _audit(engine: Engine) -> list[str]:
    with session_scope(engine) as s:
        return [e.action for e in s.scalars(select(AuditEntry).order_by(AuditEntry.id))
                if e.action.startswith("breakage.")]


def test_a_triager_acts_and_the_breakage_json_shows_it(
    setup: tuple[TestClient, dict[str, str], int], engine: Engine,
) -> None:
    client, tokens, bid = setup
    as_triager = tokens["triager"]
    url = f"/api/breakages/{bid}"
    assert client.post(f"{url}/note", json={"note": "see the bug"}, headers=as_triager).json()[
        "note"] == "see the bug"
    doc = client.post(f"{url}/link", json={"url": "https://github.com/pytorch/pytorch/issues/9"},
                      headers=as_triager).json()
    assert doc["links"][0]["url"].endswith("/issues/9") and doc["links"][0]["by"] == "token:triager"
    doc = client.post(f"{url}/snooze", json={"until": "2099-01-01", "reason": "known"},
                      headers=as_triager).json()
    assert doc["snooze"]["active"] and doc["snooze"]["until"].startswith("2099-01-01")
    assert doc["snooze"]["by"] == "token:triager" and doc["snooze"]["reason"] == "known"
    doc = client.post(f"{url}/dispute", json={"pr": 101, "reason": "docs only"},
                      headers=as_triager).json()
    assert doc["disputes"] == [{"pr": 101, "reason": "docs only", "by": "token:triager",
                                "at": doc["disputes"][0]["at"]}]
    culprits = client.get(f"{url}/culprits").json()
    assert [(c["pr"], c["disputed"]) for c in culprits["suspects"]] == [(101, True), (202, False)]
    doc = client.post(f"{url}/close", json={"reason": "fixed in the vendor"},
                      headers=as_triager).json()
    assert doc["status"] == "closed" and doc["closed"]["by"] == "token:triager"
    assert client.get("/api/breakages", params={"status": "closed"}).json()["total"] == 1
    doc = client.post(f"{url}/reopen", json={}, headers=as_triager).json()
    assert doc["status"] == "open" and doc["closed"] is None
    assert client.get(url).json()["snooze"]["torch"] is None
    assert _audit(engine) == ["breakage.note", "breakage.link", "breakage.snooze",
                              "breakage.dispute", "breakage.close", "breakage.reopen"]


BODIES = {"note": {"note": "x"}, "link": {"url": "https://x.example/1"},
          "snooze": {"until": "2099-01-01"}, "dispute": {"pr": 101, "reason": "r"},
          "close": {}, "reopen": {}}


@pytest.mark.parametrize("action", list(BODIES))
def test_a_viewer_is_refused_and_nobody_is_asked_to_log_in(
    setup: tuple[TestClient, dict[str, str], int], engine: Engine, action: str,
) -> None:
    client, tokens, bid = setup
    refused = client.post(f"/api/breakages/{bid}/{action}", json=BODIES[action],
                          headers=tokens["viewer"])
    assert refused.status_code == 403 and "viewer" in refused.json()["detail"]
    anonymous = client.post(f"/api/breakages/{bid}/{action}", json=BODIES[action])
    assert anonymous.status_code == 401
    bad = client.post(f"/api/breakages/{bid}/{action}", json=BODIES[action],
                      headers={"Authorization": "Bearer ootci_not-a-token"})
    assert bad.status_code == 401
    assert _audit(engine) == []


@pytest.mark.parametrize("action, body, status, says", [
    ("snooze", {"until": "2001-01-01"}, 422, "not in the future"),
    ("snooze", {"until": "31/12/2099"}, 422, "not an ISO date"),
    ("snooze", {"torch": "newest"}, 422, "not a torch version"),
    ("snooze", {}, 422, "give one of them"),
    ("link", {"url": "javascript:alert(1)"}, 422, "not an http"),
    ("dispute", {"pr": 999, "reason": "r"}, 422, "not a suspect"),
    ("dispute", {"pr": 101}, 422, "reason"),
    ("reopen", {}, 422, "open already"),
    ("note", {"note": "x", "extra": 1}, 422, "extra"),
])
def test_bad_input_is_a_clear_422_and_writes_nothing(
    setup: tuple[TestClient, dict[str, str], int], engine: Engine, action: str,
    body: dict[str, object], status: int, says: str,
) -> None:
    client, tokens, bid = setup
    resp = client.post(f"/api/breakages/{bid}/{action}", json=body, headers=tokens["triager"])
    assert resp.status_code == status and says in resp.text, resp.text
    assert _audit(engine) == []
    with session_scope(engine) as s:
        assert s.scalars(select(OutboxMessage).where(
            OutboxMessage.kind == OutboxKind.PR_REPORT)).all() == []


def test_an_unknown_breakage_is_404(setup: tuple[TestClient, dict[str, str], int]) -> None:
    client, tokens, _ = setup
    resp = client.post("/api/breakages/9999/close", json={}, headers=tokens["triager"])
    assert resp.status_code == 404 and resp.json()["detail"] == "breakage 9999 does not exist"
