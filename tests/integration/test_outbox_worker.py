"""The outbox drained by a real Celery worker process (Postgres + Redis), against a real
HTTP server speaking GitHub's REST API: delivered once through a 502, and a second drain
(beat's periodic one, or a redelivery) sends nothing twice."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.db import make_engine
from service.migrate import upgrade
from service.models import Breakage, OutboxMessage, OutboxState
from tests.support.fake_github import FakeGitHub
from tests.support.paths import REPO_ROOT
from tests.support.upstream_rows import CASE, breakage_with_range

pytest_plugins = ["tests.support.github_fixtures"]
pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

# A database of its own on the Redis server: the run-distribution tests use 5.
REDIS_URL = "redis://127.0.0.1:6379/7"


@pytest.fixture
def worker(fresh_postgres_url: str, fake_github: FakeGitHub, tmp_path: Path) -> Iterator[Celery]:
    broker = redis.Redis.from_url(REDIS_URL)
    try:
        broker.ping()
    except redis.ConnectionError:
        pytest.skip(f"Redis not reachable at {REDIS_URL}")
    broker.flushdb()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    env.update({
        "OOTCI_HOME": str(tmp_path / "home"),
        "OOTCI_DATABASE_URL": fresh_postgres_url,
        "OOTCI_BROKER_URL": REDIS_URL,
        "OOTCI_GITHUB_API_URL": fake_github.url,
        "OOTCI_GITHUB_TOKEN": fake_github.token,
    })
    log = (tmp_path / "worker.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "--pool=solo",
         "-Q", "ootci", "-n", "outbox@%h", "--loglevel=INFO", "--without-gossip",
         "--without-mingle", "--without-heartbeat"],
        cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    client = Celery("ootci", broker=REDIS_URL)
    client.conf.task_default_queue = "ootci"
    try:
        yield client
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        broker.flushdb()
        print((tmp_path / "worker.log").read_text(errors="replace")[-4000:])


def _wait(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


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
    _wait(lambda: fake_github.comments("pytorch/pytorch", 120969), 90, "the PR comment")
    worker.send_task("ootci.github.drain_outbox")  # a second drain finds nothing due

    def all_sent() -> bool:
        with Session(engine) as session:
            states = session.scalars(select(OutboxMessage.state)).all()
        return bool(states) and all(s == OutboxState.SENT for s in states)

    _wait(all_sent, 60, "every outbox message sent")
    time.sleep(2)  # room for the second drain to (wrongly) post again
    assert len(fake_github.comments("pytorch/pytorch", 120969)) == 1
    assert fake_github.labels("pytorch/pytorch", 120969) == ["module: PrivateUse1-break"]
    with Session(engine) as session:
        breakage = session.get(Breakage, breakage_id)
        assert breakage is not None and breakage.culprits[0]["pr"] == 120969
    engine.dispose()
