"""The outbox drained by a real Celery worker process (Postgres + Redis), against a real
HTTP server speaking GitHub's REST API: delivered once through a 502, and a second drain
(beat's periodic one, or a redelivery) sends nothing twice."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import Celery
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.db import make_engine
from service.migrate import upgrade
from service.models import Breakage, CulpritVerification, OutboxMessage, OutboxState
from tests.support import redis_dbs
from tests.support.fake_github import FakeGitHub
from tests.support.processes import solo_worker
from tests.support.upstream_rows import CASE, breakage_with_range
from tests.support.waiting import wait_until

pytest_plugins = ["tests.support.github_fixtures"]
pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

REDIS_URL = redis_dbs.url(redis_dbs.OUTBOX_WORKER)


@pytest.fixture
def worker(fresh_postgres_url: str, fake_github: FakeGitHub, tmp_path: Path) -> Iterator[Celery]:
    with solo_worker("outbox", REDIS_URL, tmp_path, {
        "OOTCI_DATABASE_URL": fresh_postgres_url,
        "OOTCI_GITHUB_API_URL": fake_github.url,
        "OOTCI_GITHUB_TOKEN": fake_github.token,
        "OOTCI_LABEL_UNVERIFIED": "true",  # labelled on its score, as before verification
    }) as client:
        yield client


def test_a_worker_drains_the_outbox_once_through_a_502(
    worker: Celery, fresh_postgres_url: str, fake_github: FakeGitHub
) -> None:
    engine = make_engine(fresh_postgres_url)
    upgrade(engine)
    base, head = fake_github.load_compare_case(CASE)
    with Session(engine) as session:
        breakage_id = breakage_with_range(session, base, head).id
    fake_github.fail_with_5xx(times=1, status=502, method="POST", path=r"/issues/\d+/comments$")

    worker.send_task("ootci.github.drain_outbox")
    wait_until(lambda: fake_github.comments("pytorch/pytorch", 120969), 90, "the PR comment")
    worker.send_task("ootci.github.drain_outbox")  # a second drain finds nothing due

    def all_sent() -> bool:
        with Session(engine) as session:
            states = session.scalars(select(OutboxMessage.state)).all()
        return bool(states) and all(s == OutboxState.SENT for s in states)

    wait_until(all_sent, 60, "every outbox message sent")
    time.sleep(2)  # room for the second drain to (wrongly) post again
    assert len(fake_github.comments("pytorch/pytorch", 120969)) == 1
    assert fake_github.labels("pytorch/pytorch", 120969) == ["module: PrivateUse1-break"]
    with Session(engine) as session:
        breakage = session.get(Breakage, breakage_id)
        assert breakage is not None and breakage.culprits[0]["pr"] == 120969

    # The drain that ranked it queued its verification (ootci.culprit.verify): these rows
    # have no torch env to undo anything in, and the worker says so.
    def verified() -> list[CulpritVerification]:
        with Session(engine) as session:
            return list(session.scalars(select(CulpritVerification)))

    wait_until(verified, 90, "the verification of the top suspects")
    top = next(v for v in verified() if v.pr == 120969)
    assert top.state == "error" and "no red torch to undo it in" in top.evidence
    engine.dispose()
