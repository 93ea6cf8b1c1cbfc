"""A relayed PR's wheel_url (and the PR wheel template) is judged at the webhook door by the
wheel rules: a refused URL queues nothing and the delivery says why."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from service.api.app import create_app
from service.commands.runs import get_or_create_backend
from service.config import Settings
from service.db import session_scope
from service.models import Run
from tests.support.webhooks import SECRET, CommitCheckingDispatcher, counts, fixture_body, post

GOOD = "https://download.pytorch.org/whl/pr/165432/torch-2.14.0-py3-none-any.whl"


def _client(engine: Engine, settings: Settings) -> TestClient:
    with session_scope(engine) as s:
        get_or_create_backend(s, "torch_openreg", "/srv/backends/torch_openreg")
    return TestClient(create_app(settings, dispatcher=CommitCheckingDispatcher(engine), engine=engine))


@pytest.fixture
def client(engine: Engine, tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(home=tmp_path, webhook_secret=SECRET, default_torch="installed",
                        relay_repositories=["acme/torch-acme"])
    with _client(engine, settings) as c:
        yield c


def _relayed(wheel_url: str, sha256: str | None = None) -> bytes:
    payload: dict[str, Any] = json.loads(fixture_body("repository_dispatch_pull_request.json"))
    payload["client_payload"]["wheel_url"] = wheel_url
    if sha256 is not None:
        payload["client_payload"]["wheel_sha256"] = sha256
    return json.dumps(payload).encode()


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://download.pytorch.org/whl/torch-2.14.0-py3-none-any.whl", "is not https"),
        ("https://127.0.0.1:8443/torch-2.14.0-py3-none-any.whl", "not in OOTCI_WHEEL_HOSTS"),
        ("https://169.254.169.254/torch-2.14.0-py3-none-any.whl", "not in OOTCI_WHEEL_HOSTS"),
        ("https://evil.example.org/torch-2.14.0-py3-none-any.whl", "not in OOTCI_WHEEL_HOSTS"),
    ],
)
def test_a_wheel_url_the_rules_refuse_queues_nothing(
    client: TestClient, engine: Engine, url: str, says: str
) -> None:
    answer = post(client, _relayed(url), "repository_dispatch")
    assert answer.status_code == 202, answer.text
    body = answer.json()
    assert body["status"] == "recorded" and body["run_ids"] == []
    assert "the PR's wheel URL is refused, nothing queued" in body["reason"] and says in body["reason"]
    assert counts(engine)[0] == 0


def test_an_allowed_host_that_resolves_to_loopback_is_refused_at_the_door(
    engine: Engine, tmp_path: Path
) -> None:
    settings = Settings(home=tmp_path, webhook_secret=SECRET, relay_repositories=["acme/torch-acme"],
                        wheel_hosts=["localhost"])
    with _client(engine, settings) as c:
        body = post(c, _relayed("https://localhost/torch-2.14.0-py3-none-any.whl"),
                    "repository_dispatch").json()
    assert body["run_ids"] == [] and "a loopback address" in body["reason"]


def test_the_template_is_judged_like_a_relayed_url(engine: Engine, tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, webhook_secret=SECRET, relay_repositories=["acme/torch-acme"],
                        pr_wheel_url_template="http://10.0.0.5/{pr}/{sha}/torch-2.14.0-py3-none-any.whl")
    with _client(engine, settings) as c:
        body = post(c, fixture_body("pull_request_labeled.json"), "pull_request").json()
    assert body["run_ids"] == [] and "is not https" in body["reason"]


def test_the_relays_sha256_travels_with_the_run(client: TestClient, engine: Engine) -> None:
    sha = "AB" * 32
    body = post(client, _relayed(GOOD, sha), "repository_dispatch").json()
    assert body["status"] == "queued", body
    with Session(engine) as s:
        run = s.scalars(select(Run)).one()
    assert run.trigger_info["wheel_sha256"] == sha.lower()
    assert run.torch_spec == f"wheel:{GOOD}"


def test_a_malformed_sha256_is_a_bad_payload(client: TestClient, engine: Engine) -> None:
    answer = post(client, _relayed(GOOD, "not-a-hash"), "repository_dispatch")
    assert answer.status_code == 400 and "wheel_sha256" in answer.text
    assert counts(engine)[0] == 0
