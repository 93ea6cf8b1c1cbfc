"""/api/backends: registering from a git repository takes the token and a readable source;
a push to a registered repository queues its nightly targets (the pins and the newest
nightly) at the pushed sha; a CLI experiment from
the same repository is not rebuilt."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from service.api.app import create_app
from service.commands.backends import register_backend
from service.config import Settings
from service.db import session_scope
from service.models import Backend, BackendChange, Run
from tests.support.git_repos import Remote, make_remote, push_payload
from tests.support.helpers import RecordingDispatcher
from tests.support.pyonly import write_pyonly_backend

TOKEN = "t0ken-for-tests"
SECRET = "hook-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PINS = ["pip:torch==2.13.0", "pip:torch==2.14.1"]


@pytest.fixture
def remote(tmp_path: Path) -> Remote:
    r = make_remote(tmp_path)
    write_pyonly_backend(r.work / "vendor", {"test_ok.py": "def test_ok():\n    pass\n"})
    r.push("first")
    return r


@pytest.fixture
def client(engine: Engine, tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(home=tmp_path / "home", api_token=TOKEN, webhook_secret=SECRET,
                        pins=PINS)
    app = create_app(settings, dispatcher=RecordingDispatcher(), engine=engine)
    with TestClient(app) as c:
        yield c


def deliver_push(client: TestClient, payload: dict[str, object]) -> dict[str, object]:
    body = json.dumps(payload).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    resp = client.post("/webhooks/github", content=body, headers={
        "Content-Type": "application/json", "X-GitHub-Event": "push",
        "X-GitHub-Delivery": str(uuid.uuid4()), "X-Hub-Signature-256": signature,
    })
    assert resp.status_code == 202, resp.text
    return dict(resp.json())


def backend_rows(engine: Engine) -> int:
    with Session(engine) as s:
        return s.scalar(select(func.count(Backend.id))) or 0


def test_register_show_list_and_remove(client: TestClient, remote: Remote, engine: Engine) -> None:
    body = {"name": "acme", "git": remote.url, "ref": "main", "subdir": "vendor"}
    assert client.post("/api/backends", json=body).status_code == 401
    assert backend_rows(engine) == 0
    resp = client.post("/api/backends", json=body, headers=AUTH)
    assert resp.status_code == 201, resp.text
    assert resp.json()["source"] == remote.url and resp.json()["subdir"] == "vendor"
    assert [c["change"] for c in resp.json()["changes"]] == ["registered"]
    assert client.get("/api/backends/acme").json()["ref"] == "main"
    assert [b["name"] for b in client.get("/api/backends").json()] == ["acme"]

    other = make_remote(remote.bare.parent / "other")
    other.push("another vendor's first commit")
    taken = client.post("/api/backends", json={**body, "git": other.url}, headers=AUTH)
    assert taken.status_code == 409, taken.text

    assert client.delete("/api/backends/acme").status_code == 401
    assert client.delete("/api/backends/acme", headers=AUTH).status_code == 204
    assert client.get("/api/backends").json() == []
    assert client.get("/api/backends/acme").status_code == 404
    assert client.delete("/api/backends/acme", headers=AUTH).status_code == 404


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"git": "file:///nonexistent/repo.git"}, "cannot read the git repository"),
        ({"ref": "no-such-branch"}, "no branch or tag"),
        ({"git": "/srv/backends/acme"}, "not a git URL"),
    ],
)
def test_a_source_that_cannot_be_built_is_422_and_nothing_is_written(
    client: TestClient, remote: Remote, engine: Engine, change: dict[str, str], expected: str
) -> None:
    body = {"name": "acme", "git": remote.url, "ref": "main", **change}
    resp = client.post("/api/backends", json=body, headers=AUTH)
    assert resp.status_code == 422, resp.text
    assert expected in resp.json()["detail"]
    assert backend_rows(engine) == 0


def test_a_push_to_a_registered_repository_queues_its_nightly_targets_at_the_pushed_sha(
    client: TestClient, remote: Remote, engine: Engine
) -> None:
    body = {"name": "acme", "git": remote.url, "ref": "main", "subdir": "vendor"}
    assert client.post("/api/backends", json=body, headers=AUTH).status_code == 201
    sha = remote.push("second")
    answer = deliver_push(client, push_payload(remote, sha))
    assert answer["status"] == "queued", answer
    with Session(engine) as s:
        runs = s.scalars(select(Run).where(Run.id.in_(answer["run_ids"]))).all()  # type: ignore[arg-type]
        assert sorted(r.torch_spec for r in runs) == sorted([*PINS, "nightly"])
        assert {r.backend_sha for r in runs} == {sha}
        assert {r.trigger for r in runs} == {"webhook"}


def test_a_push_does_not_rebuild_an_experiment_or_a_removed_backend(
    client: TestClient, remote: Remote, engine: Engine
) -> None:
    with session_scope(engine) as s:
        # What `ootci run --backend <a clone's URL>` experiments would leave: not registered.
        register_backend(s, "experiment", remote.url, changed_by="cli:alice@host")
    sha = remote.push("second")
    assert deliver_push(client, push_payload(remote, sha))["status"] == "ignored"

    body = {"name": "acme", "git": remote.url, "ref": "main"}
    assert client.post("/api/backends", json=body, headers=AUTH).status_code == 201
    with session_scope(engine) as s:
        s.add(Run(backend_id=s.scalar(select(Backend.id).where(Backend.name == "acme")),
                  torch_spec="installed", trigger="cli"))
    assert client.delete("/api/backends/acme", headers=AUTH).status_code == 204
    sha = remote.push("third")
    assert deliver_push(client, push_payload(remote, sha))["status"] == "ignored"
    with Session(engine) as s:
        changes = s.scalars(select(BackendChange.change).order_by(BackendChange.id)).all()
    assert changes == ["registered", "registered", "removed"]
