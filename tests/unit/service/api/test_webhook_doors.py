"""Webhook hardening (issue #14 item 7) against a real app and database (SQLite and
Postgres): the same event under a new delivery id, a run already queued, relays from
unlisted repositories, and per-repository secrets."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from service.api.app import create_app
from service.commands.backends import add_backend
from service.commands.runs import get_or_create_backend
from service.config import Settings
from service.db import session_scope
from service.models import Run, RunState, WebhookDelivery
from tests.support.webhooks import (
    SECRET,
    CommitCheckingDispatcher,
    counts,
    fixture_body,
    post,
    sign,
)

ACME_SECRET = "acme's own secret"


def make_client(engine: Engine, settings: Settings) -> TestClient:
    with session_scope(engine) as s:
        get_or_create_backend(s, "torch_openreg", "/srv/backends/torch_openreg")
        # Registered (not a CLI experiment), so a push to its repository rebuilds it.
        add_backend(s, "acme", "https://github.com/acme/torch-acme.git", changed_by="test")
    return TestClient(create_app(settings, dispatcher=CommitCheckingDispatcher(engine),
                                 engine=engine))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path, webhook_secret=SECRET, default_torch="installed",
                    pins=["pip:torch==2.13.0"], relay_repositories=["pytorch/pytorch-relay"],
                    webhook_secrets={"acme/torch-acme": ACME_SECRET},
                    # A PR's runs test its own build (or wait for it): where that build is.
                    pr_wheel_url_template="https://pr-builds.example.org/{pr}/{sha}/torch-2.14.0-py3-none-any.whl",
                    wheel_hosts=["pr-builds.example.org"])


@pytest.fixture
def client(engine: Engine, settings: Settings) -> Iterator[TestClient]:
    with make_client(engine, settings) as c:
        yield c


def test_the_same_event_under_a_new_delivery_id_is_a_duplicate(
    client: TestClient, engine: Engine
) -> None:
    # A push to a registered backend's repository: PR events have their own (PR, head sha,
    # backend) dedupe, which the next tests meet.
    body = fixture_body("push_backend.json")
    first = client.post("/webhooks/github", content=body, headers={
        "X-GitHub-Event": "push", "X-GitHub-Delivery": "d-1",
        "X-Hub-Signature-256": sign(body, ACME_SECRET)})
    assert first.json()["status"] == "queued", first.json()
    runs_after_first = counts(engine)[0]
    # The runs finished, so the twin rule does not hold it back: the key does.
    with session_scope(engine) as s:
        s.execute(update(Run).values(state=RunState.PASSED))
    replay = client.post("/webhooks/github", content=body, headers={
        "X-GitHub-Event": "push", "X-GitHub-Delivery": "d-2-forged",
        "X-Hub-Signature-256": sign(body, ACME_SECRET)})
    assert replay.status_code == 200 and replay.json()["status"] == "duplicate", replay.json()
    assert counts(engine)[0] == runs_after_first


def test_a_relayed_copy_of_a_direct_event_is_a_duplicate(
    engine: Engine, settings: Settings
) -> None:
    relayed = json.loads(fixture_body("repository_dispatch_pull_request.json"))
    relayed["repository"]["full_name"] = "pytorch/pytorch-relay"
    direct = relayed["client_payload"]["payload"]
    with make_client(engine, settings) as c:
        first = post(c, json.dumps(relayed).encode(), "repository_dispatch")
        assert first.json()["status"] == "queued", first.json()
        with session_scope(engine) as s:
            s.execute(update(Run).values(state=RunState.FAILED))
        again = post(c, json.dumps(direct).encode(), "pull_request")
        # Caught by the event's key, or by the PR's (PR, head sha, backend) dedupe first.
        assert again.json()["status"] in {"duplicate", "recorded"}, again.json()
        assert again.json()["run_ids"] == []


def test_no_new_run_while_an_identical_one_is_queued(
    client: TestClient, engine: Engine
) -> None:
    labeled = fixture_body("pull_request_labeled.json")
    first = post(client, labeled, "pull_request")
    assert first.json()["status"] == "queued"
    # A synchronize of the same head sha (GitHub sends it after a force-push back): the
    # runs for that sha are still queued, so nothing new is queued.
    sync = json.loads(fixture_body("pull_request_synchronize.json"))
    sync["pull_request"]["head"]["sha"] = json.loads(labeled)["pull_request"]["head"]["sha"]
    resp = post(client, json.dumps(sync).encode(), "pull_request")
    assert resp.json()["status"] == "recorded", resp.json()
    assert "already has its run for this head sha" in resp.json()["reason"]
    assert resp.json()["run_ids"] == []
    assert counts(engine)[0] == len(first.json()["run_ids"])


def test_repository_dispatch_from_an_unlisted_repository_is_ignored(
    client: TestClient, engine: Engine
) -> None:
    resp = post(client, fixture_body("repository_dispatch_pull_request.json"),
                "repository_dispatch")
    assert resp.status_code == 202
    assert resp.json()["status"] == "ignored"
    assert "OOTCI_RELAY_REPOSITORIES" in resp.json()["reason"]
    assert counts(engine) == (0, 1)


def test_a_repositorys_own_secret_speaks_only_for_that_repository(
    client: TestClient, engine: Engine
) -> None:
    own = fixture_body("push_backend.json")  # acme/torch-acme
    resp = client.post("/webhooks/github", content=own, headers={
        "X-GitHub-Event": "push", "X-GitHub-Delivery": "acme-1",
        "X-Hub-Signature-256": sign(own, ACME_SECRET)})
    assert resp.status_code == 202 and resp.json()["status"] == "queued", resp.json()
    upstream = fixture_body("pull_request_labeled.json")  # pytorch/pytorch
    forged = client.post("/webhooks/github", content=upstream, headers={
        "X-GitHub-Event": "pull_request", "X-GitHub-Delivery": "acme-2",
        "X-Hub-Signature-256": sign(upstream, ACME_SECRET)})
    assert forged.status_code == 401 and "acme/torch-acme" in forged.json()["detail"]
    with Session(engine) as s:
        delivered = set(s.scalars(select(WebhookDelivery.delivery_id)))
    assert delivered == {"acme-1"}  # the forged one left no row
