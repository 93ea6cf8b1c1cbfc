"""GitHub webhook deliveries to an app under test: the fixture payloads
(tests/fixtures/webhooks/), signing, posting, and what a delivery left behind."""

from __future__ import annotations

import hashlib
import hmac
import uuid
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from service.models import Run, WebhookDelivery
from tests.support.paths import FIXTURES as ALL_FIXTURES

if TYPE_CHECKING:
    from fastapi.testclient import TestClient

FIXTURES = ALL_FIXTURES / "webhooks"
SECRET = "It's a Secret to Everybody"


class CommitCheckingDispatcher:
    """Records enqueued runs, and checks each is already committed when it arrives (a
    worker in another process must be able to read the row)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.enqueued: list[int] = []

    def enqueue_run(self, run_id: int) -> None:
        with Session(self.engine) as fresh:
            assert fresh.get(Run, run_id) is not None, f"run {run_id} enqueued before commit"
        self.enqueued.append(run_id)

    def check(self) -> None:
        return None

    def close(self) -> None:
        return None


def fixture_body(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def post(
    client: TestClient,
    body: bytes,
    event: str | None,
    *,
    delivery: str | None = None,
    signature: str | None = "auto",
) -> Any:
    headers = {"Content-Type": "application/json"}
    if event is not None:
        headers["X-GitHub-Event"] = event
    headers["X-GitHub-Delivery"] = delivery or str(uuid.uuid4())
    if signature == "auto":
        headers["X-Hub-Signature-256"] = sign(body)
    elif signature is not None:
        headers["X-Hub-Signature-256"] = signature
    return client.post("/webhooks/github", content=body, headers=headers)


def counts(engine: Engine) -> tuple[int, int]:
    """(runs, webhook deliveries) in the database."""
    with Session(engine) as s:
        return (
            s.scalar(select(func.count(Run.id))) or 0,
            s.scalar(select(func.count(WebhookDelivery.id))) or 0,
        )
