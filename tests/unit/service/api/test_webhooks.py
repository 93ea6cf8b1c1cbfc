"""POST /webhooks/github against a real app and database (SQLite and Postgres)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from service.api.app import create_app
from service.commands.backends import add_backend
from service.commands.runs import get_or_create_backend
from service.config import Settings
from service.db import session_scope
from service.models import Run, SourceKind, TorchBuild, WebhookDelivery
from tests.support.webhooks import (
    SECRET,
    CommitCheckingDispatcher,
    counts,
    fixture_body,
    post,
    sign,
)


@pytest.fixture
def dispatcher(engine: Engine) -> CommitCheckingDispatcher:
    return CommitCheckingDispatcher(engine)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        home=tmp_path,
        webhook_secret=SECRET,
        default_torch="installed",
        pins=["pip:torch==2.13.0", "pip:torch==2.14.1"],
        pr_wheel_url_template=PR_WHEELS + "/{pr}/{sha}/torch-2.14.0-py3-none-any.whl",
        relay_repositories=["acme/torch-acme"],
        wheel_hosts=["pr-builds.example.org"],
    )


@pytest.fixture
def client(
    engine: Engine, settings: Settings, dispatcher: CommitCheckingDispatcher
) -> Iterator[TestClient]:
    with session_scope(engine) as s:
        get_or_create_backend(s, "torch_openreg", "/srv/backends/torch_openreg")
        add_backend(s, "acme", "https://github.com/acme/torch-acme.git", changed_by="test")
    with TestClient(create_app(settings, dispatcher=dispatcher, engine=engine)) as c:
        yield c


PR_WHEELS = "https://pr-builds.example.org"


def test_signature_helper_matches_githubs_documented_example() -> None:
    # From GitHub's "Validating webhook deliveries": secret and payload give this digest.
    from service.github.relay import signature_matches

    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert signature_matches(SECRET.encode(), b"Hello, World!", expected)
    assert not signature_matches(SECRET.encode(), b"Hello, World?", expected)
    assert not signature_matches(b"", b"Hello, World!", expected)


def test_labeled_pr_queues_one_run_per_backend_after_commit(
    client: TestClient, engine: Engine, dispatcher: CommitCheckingDispatcher
) -> None:
    resp = post(client, fixture_body("pull_request_labeled.json"), "pull_request", delivery="d-1")
    assert resp.status_code == 202, resp.text
    body = resp.json()
    assert body["status"] == "queued"
    assert len(body["run_ids"]) == 2
    assert sorted(dispatcher.enqueued) == sorted(body["run_ids"])
    with Session(engine) as s:
        runs = s.scalars(select(Run).where(Run.id.in_(body["run_ids"]))).all()
        assert {r.trigger for r in runs} == {"webhook"}
        # The PR's own torch, never the default: it waits until upstream publishes it.
        wheel = f"{PR_WHEELS}/165432/3f1c2a9d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39/torch-2.14.0-py3-none-any.whl"
        assert {r.torch_spec for r in runs} == {f"wheel:{wheel}"}
        assert {r.state for r in runs} == {"waiting"}
        assert all((r.error or "").startswith(f"waiting for upstream build: {wheel}") for r in runs)
        info = runs[0].trigger_info
        assert info["pr"] == 165432
        assert info["sha"] == "3f1c2a9d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39"
        assert info["url"] == "https://github.com/pytorch/pytorch/pull/165432"
        assert info["delivery"] == "d-1"
        delivery = s.scalar(select(WebhookDelivery).where(WebhookDelivery.delivery_id == "d-1"))
        assert delivery is not None
        assert (delivery.event, delivery.action, delivery.outcome) == (
            "pull_request",
            "labeled",
            "queued",
        )
        assert sorted(delivery.run_ids) == sorted(body["run_ids"])
        assert delivery.payload["number"] == 165432


def test_wrong_signature_is_401_and_leaves_no_trace(
    client: TestClient, engine: Engine, dispatcher: CommitCheckingDispatcher
) -> None:
    body = fixture_body("pull_request_labeled.json")
    for signature in (
        sign(body, "not the secret"),
        "sha256=" + "0" * 64,
        "sha1=abc",
        sign(body + b" "),
    ):
        resp = post(client, body, "pull_request", signature=signature)
        assert resp.status_code == 401, signature
        assert "X-Hub-Signature-256" in resp.json()["detail"]
    assert counts(engine) == (0, 0)
    assert dispatcher.enqueued == []


def test_missing_signature_is_401(client: TestClient, engine: Engine) -> None:
    resp = post(client, fixture_body("pull_request_labeled.json"), "pull_request", signature=None)
    assert resp.status_code == 401
    assert counts(engine) == (0, 0)


def test_replayed_delivery_is_200_duplicate_and_queues_nothing(
    client: TestClient, engine: Engine, dispatcher: CommitCheckingDispatcher
) -> None:
    body = fixture_body("pull_request_labeled.json")
    first = post(client, body, "pull_request", delivery="same-guid")
    assert first.status_code == 202
    runs_after_first = counts(engine)
    enqueued = list(dispatcher.enqueued)
    again = post(client, body, "pull_request", delivery="same-guid")
    assert again.status_code == 200
    assert again.json()["status"] == "duplicate"
    assert counts(engine) == runs_after_first
    assert dispatcher.enqueued == enqueued


def test_malformed_json_is_400(
    client: TestClient, engine: Engine, dispatcher: CommitCheckingDispatcher
) -> None:
    for i, body in enumerate((b'{"action": "labeled", ', b"[1, 2, 3]", b"\xff\xfe not utf-8")):
        resp = post(client, body, "pull_request", delivery=f"bad-{i}")
        assert resp.status_code == 400, body
    assert counts(engine) == (0, 3)  # signed, so recorded as rejected, with why
    assert dispatcher.enqueued == []
    with Session(engine) as s:
        row = s.scalar(select(WebhookDelivery).where(WebhookDelivery.delivery_id == "bad-0"))
    assert row is not None and row.outcome == "rejected"
    assert (row.reason or "").startswith("body is not JSON")
    assert row.payload == {"unparsed": '{"action": "labeled", '}


def test_signed_payload_missing_required_fields_is_400_and_recorded(
    client: TestClient, engine: Engine
) -> None:
    resp = post(client, b'{"action": "labeled"}', "pull_request", delivery="broken-1")
    assert resp.status_code == 400
    assert "pull_request" in resp.json()["detail"]
    with Session(engine) as s:
        row = s.scalar(select(WebhookDelivery).where(WebhookDelivery.delivery_id == "broken-1"))
        assert row is not None and row.outcome == "rejected"
    assert counts(engine)[0] == 0


def test_missing_event_or_delivery_header_is_400(client: TestClient, engine: Engine) -> None:
    body = fixture_body("pull_request_labeled.json")
    assert post(client, body, None).status_code == 400
    resp = client.post(
        "/webhooks/github",
        content=body,
        headers={"X-GitHub-Event": "pull_request", "X-Hub-Signature-256": sign(body)},
    )
    assert resp.status_code == 400
    assert counts(engine) == (0, 0)


def test_ten_megabyte_body_is_413(
    client: TestClient, engine: Engine, dispatcher: CommitCheckingDispatcher
) -> None:
    payload = json.loads(fixture_body("pull_request_labeled.json"))
    payload["pull_request"]["body"] = "x" * (10 * 1024 * 1024)
    body = json.dumps(payload).encode()
    resp = post(client, body, "pull_request")
    assert resp.status_code == 413
    assert counts(engine) == (0, 0)
    assert dispatcher.enqueued == []


def test_unknown_event_is_202_recorded(client: TestClient, engine: Engine) -> None:
    resp = post(client, fixture_body("issues_opened.json"), "issues", delivery="iss-1")
    assert resp.status_code == 202
    assert resp.json()["status"] == "recorded"
    with Session(engine) as s:
        row = s.scalar(select(WebhookDelivery).where(WebhookDelivery.delivery_id == "iss-1"))
        assert row is not None and row.outcome == "recorded" and "issues" in (row.reason or "")
    assert counts(engine)[0] == 0


def test_ping_is_recorded(client: TestClient) -> None:
    resp = post(client, fixture_body("ping.json"), "ping")
    assert resp.status_code == 202
    assert resp.json()["status"] == "recorded"


def test_other_label_is_ignored(client: TestClient, engine: Engine) -> None:
    resp = post(client, fixture_body("pull_request_labeled_other.json"), "pull_request")
    assert resp.status_code == 202
    assert resp.json()["status"] == "ignored"
    assert "module: docs" in resp.json()["reason"]
    assert counts(engine)[0] == 0


def test_new_commits_on_labelled_pr_queue_again(client: TestClient) -> None:
    resp = post(client, fixture_body("pull_request_synchronize.json"), "pull_request")
    assert resp.json()["status"] == "queued"


def test_upstream_push_without_a_build_is_recorded_with_reason(
    client: TestClient, engine: Engine
) -> None:
    resp = post(client, fixture_body("push_upstream_main.json"), "push")
    assert resp.status_code == 202
    assert resp.json()["status"] == "recorded"
    assert "not installable" in resp.json()["reason"]
    assert counts(engine)[0] == 0


def test_upstream_push_matching_a_cli_only_build_is_recorded_not_run(
    client: TestClient, engine: Engine
) -> None:
    """A wheel: build came from the CLI; a delivery gets only what API callers get."""
    sha = json.loads(fixture_body("push_upstream_main.json"))["after"]
    with session_scope(engine) as s:
        s.add(TorchBuild(spec="path:/srv/torch-overlay", source_kind=SourceKind.PATH,
                         version="2.15.0a0+gitb7e4c1d", git_version=sha))
    resp = post(client, fixture_body("push_upstream_main.json"), "push")
    assert resp.json()["status"] == "recorded"
    assert "CLI-only" in resp.json()["reason"]
    assert counts(engine)[0] == 0


def test_upstream_push_with_a_known_build_queues_runs_on_it(
    engine: Engine, settings: Settings, dispatcher: CommitCheckingDispatcher
) -> None:
    """The operator may let callers run any spec; then a wheel build of the commit runs."""
    with session_scope(engine) as s:
        get_or_create_backend(s, "torch_openreg", "/srv/backends/torch_openreg")
    permissive = settings.model_copy(update={"api_allow_any_torch_spec": True})
    with TestClient(create_app(permissive, dispatcher=dispatcher, engine=engine)) as client:
        _upstream_push_with_a_wheel_build_queues_it(client, engine)


def _upstream_push_with_a_wheel_build_queues_it(client: TestClient, engine: Engine) -> None:
    sha = json.loads(fixture_body("push_upstream_main.json"))["after"]
    with session_scope(engine) as s:
        s.add(
            TorchBuild(
                spec="wheel:/wheels/torch-2.15.0a0+gitb7e4c1d-cp311-linux_x86_64.whl",
                source_kind=SourceKind.WHEEL,
                version="2.15.0a0+gitb7e4c1d",
                git_version=sha,
            )
        )
    resp = post(client, fixture_body("push_upstream_main.json"), "push")
    assert resp.json()["status"] == "queued"
    with Session(engine) as s:
        specs = set(s.scalars(select(Run.torch_spec).where(Run.id.in_(resp.json()["run_ids"]))))
    assert specs == {"wheel:/wheels/torch-2.15.0a0+gitb7e4c1d-cp311-linux_x86_64.whl"}


def test_push_to_backend_repo_rebuilds_it_against_every_nightly_target(
    client: TestClient, engine: Engine
) -> None:
    resp = post(client, fixture_body("push_backend.json"), "push")
    assert resp.json()["status"] == "queued", resp.json()
    with Session(engine) as s:
        runs = s.scalars(select(Run).where(Run.id.in_(resp.json()["run_ids"]))).all()
    assert sorted(r.torch_spec for r in runs) == ["nightly", "pip:torch==2.13.0", "pip:torch==2.14.1"]
    assert {r.backend_sha for r in runs} == {"c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00"}


def test_push_to_unrelated_repo_is_ignored(client: TestClient) -> None:
    payload = json.loads(fixture_body("push_backend.json"))
    payload["repository"].update(
        full_name="someone/else",
        clone_url="https://github.com/someone/else.git",
        html_url="https://github.com/someone/else",
        ssh_url="git@github.com:someone/else.git",
        git_url="git://github.com/someone/else.git",
        url="https://api.github.com/repos/someone/else",
    )
    resp = post(client, json.dumps(payload).encode(), "push")
    assert resp.json()["status"] == "ignored"


def test_relayed_pull_request_routes_like_a_direct_one(client: TestClient, engine: Engine) -> None:
    resp = post(
        client, fixture_body("repository_dispatch_pull_request.json"), "repository_dispatch"
    )
    assert resp.status_code == 202
    assert resp.json()["status"] == "queued"
    with Session(engine) as s:
        run = s.get_one(Run, resp.json()["run_ids"][0])
    assert run.trigger_info["via"] == "repository_dispatch:pull_request"
    assert run.trigger_info["pr"] == 165432


def test_upstream_push_contained_in_a_known_nightly_queues_that_exact_nightly(
    client: TestClient, engine: Engine, settings: Settings
) -> None:
    sha = json.loads(fixture_body("push_upstream_main.json"))["after"]
    with session_scope(engine) as s:
        s.add(
            TorchBuild(
                spec="nightly",
                source_kind=SourceKind.NIGHTLY,
                version="2.15.0.dev20261126+cpu",
                git_version=sha,
            )
        )
    resp = post(client, fixture_body("push_upstream_main.json"), "push")
    assert resp.json()["status"] == "queued"
    with Session(engine) as s:
        specs = set(s.scalars(select(Run.torch_spec).where(Run.id.in_(resp.json()["run_ids"]))))
    # Not "nightly": that would resolve to whatever is newest when the worker gets to it.
    assert specs == {f"pip:torch==2.15.0.dev20261126+cpu@@{settings.nightly_index_url}"}


def test_concurrent_copies_of_one_delivery_record_it_once(
    client: TestClient, engine: Engine
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    body = fixture_body("pull_request_labeled_other.json")  # batched path: queues nothing
    with ThreadPoolExecutor(16) as pool:
        codes = list(
            pool.map(
                lambda _: post(client, body, "pull_request", delivery="dup").status_code, range(32)
            )
        )
    assert sorted(codes) == [200] * 31 + [202]
    with ThreadPoolExecutor(16) as pool:
        codes = list(
            pool.map(
                lambda i: post(client, body, "pull_request", delivery=f"many-{i}").status_code,
                range(64),
            )
        )
    assert codes == [202] * 64
    assert counts(engine) == (0, 65)


def test_database_down_is_503_and_says_nothing_was_stored(
    tmp_path: Path, settings: Settings
) -> None:
    from service.db import make_engine

    dead = make_engine("postgresql+psycopg://postgres@127.0.0.1:1/none")
    app = create_app(settings, dispatcher=CommitCheckingDispatcher(dead), engine=dead)
    with TestClient(app) as c:
        resp = post(c, fixture_body("issues_opened.json"), "issues")
    assert resp.status_code == 503
    assert "not stored" in resp.json()["detail"]


def test_hostile_strings_in_a_signed_payload_are_stored_or_refused_never_a_500(
    client: TestClient, engine: Engine
) -> None:
    pr = json.loads(fixture_body("pull_request_labeled.json"))
    pr["repository"]["full_name"] = "evil/\x00repo"
    pr["action"] = "labeled\x00"
    resp = post(client, json.dumps(pr).encode(), "pull_request", delivery="nul-1")
    assert resp.status_code == 202 and resp.json()["status"] == "ignored"
    push = json.loads(fixture_body("push_backend.json"))
    push["after"] = "'; DROP TABLE runs; --" + "x" * 80
    resp = post(client, json.dumps(push).encode(), "push", delivery="badsha-1")
    assert resp.status_code == 400 and "commit sha" in resp.json()["detail"]
    assert counts(engine) == (0, 2)


@pytest.mark.postgres
def test_a_row_the_database_refuses_fails_alone_not_its_whole_batch(
    fresh_postgres_url: str,
) -> None:
    import asyncio

    from service.api.delivery_log import DeliveryRecorder
    from service.db import make_engine
    from service.migrate import upgrade

    engine = make_engine(fresh_postgres_url)
    upgrade(engine)
    recorder = DeliveryRecorder(engine)

    def row(delivery: str, event: str) -> dict[str, Any]:
        return {
            "delivery_id": delivery,
            "event": event,
            "action": None,
            "payload": {},
            "outcome": "recorded",
            "reason": "test",
            "run_ids": [],
            "received_at": dt.datetime.now(dt.UTC),
        }

    async def scenario() -> list[object]:
        try:
            return await asyncio.gather(
                recorder.record(row("ok-1", "push")),
                recorder.record(row("bad", "x" * 65)),  # longer than the column: refused
                recorder.record(row("ok-2", "ping")),
                recorder.record(row("ok-1", "push")),  # a copy in the same batch
                return_exceptions=True,
            )
        finally:
            await recorder.close()

    results = asyncio.run(scenario())
    assert results[0] is True and results[2] is True and results[3] is False
    assert isinstance(results[1], Exception)
    with Session(engine) as s:
        stored = set(s.scalars(select(WebhookDelivery.delivery_id)))
    engine.dispose()
    assert stored == {"ok-1", "ok-2"}
