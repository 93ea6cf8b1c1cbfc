"""The loop's next steps do not wait behind the night (issue #31): a real Celery worker
process on Postgres + Redis, the nightly matrix queued all at once; the drain that a run's
end enqueues ranks the open breakage, and the verification that drain enqueues runs,
before the worker claims the night's next run."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import Celery
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.commands.backends import add_backend
from service.db import make_engine
from service.migrate import upgrade
from service.models import Breakage, CulpritVerification, OutboxMessage, OutboxState, Run
from tests.support import redis_dbs
from tests.support.fake_github import FakeGitHub
from tests.support.fake_torch import NightlyIndex
from tests.support.processes import solo_worker
from tests.support.pyonly import write_pyonly_backend
from tests.support.upstream_rows import CASE, breakage_with_range
from tests.support.waiting import wait_until

pytest_plugins = ["tests.support.github_fixtures"]
pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

# A database of its own on the Redis server (test_outbox_worker uses 7).
REDIS_URL = redis_dbs.url(redis_dbs.LOOP_PRIORITY)
NIGHT = dt.date(2026, 11, 27)


@pytest.fixture
def worker(fresh_postgres_url: str, fake_github: FakeGitHub, tmp_path: Path) -> Iterator[Celery]:
    index = NightlyIndex(tmp_path / "index")
    index.publish("2.14.0.dev20261127+cpu", "a" * 40, {})
    with solo_worker("loop", REDIS_URL, tmp_path, {
        "OOTCI_DATABASE_URL": fresh_postgres_url,
        "OOTCI_GITHUB_API_URL": fake_github.url,
        "OOTCI_GITHUB_TOKEN": fake_github.token,
        "OOTCI_NIGHTLY_INDEX_URL": index.url,
        "OOTCI_PINS": json.dumps(["installed"]),
        "OOTCI_RERUN_FAILED_TESTS": "false",
    }) as client:
        yield client


def test_a_runs_end_ranks_and_verifies_before_the_nights_next_run_is_claimed(
    worker: Celery, fresh_postgres_url: str, fake_github: FakeGitHub, tmp_path: Path
) -> None:
    engine = make_engine(fresh_postgres_url)
    upgrade(engine)
    base, head = fake_github.load_compare_case(CASE)
    backend = write_pyonly_backend(tmp_path / "vendor", {"test_ok.py": "def test_ok():\n    pass\n"})
    with Session(engine) as session:
        # An upstream breakage waiting for its analysis (a red run of an earlier night).
        breakage_id = breakage_with_range(session, base, head).id
        add_backend(session, "vendor", str(backend), changed_by="test")
        session.commit()

    # The night's matrix: two runs queued at once (installed, then nightly).
    worker.send_task("ootci.nightly.schedule", args=[NIGHT.isoformat()])

    def night() -> list[Run]:
        with Session(engine) as session:
            return list(session.scalars(
                select(Run).where(Run.trigger == "nightly").order_by(Run.started_at)))

    wait_until(lambda: len([r for r in night() if r.started_at]) == 2, 240,
               "both of the night's runs claimed")
    first, second = night()
    assert first.torch_spec == "installed" and second.started_at is not None
    with Session(engine) as session:
        analysis = session.scalars(select(OutboxMessage).where(
            OutboxMessage.breakage_id == breakage_id).order_by(OutboxMessage.id)).first()
        ranked = session.get_one(Breakage, breakage_id).culprits_ranked_at
        verified = session.scalars(select(CulpritVerification.created_at).where(
            CulpritVerification.breakage_id == breakage_id)).all()
    assert analysis is not None and analysis.state == OutboxState.SENT
    # The drain the first run's end queued went ahead of the night's second run, and so did
    # the verification that drain queued (it errs here: these rows have no torch to undo in).
    assert first.finished_at is not None and analysis.sent_at is not None and ranked is not None
    assert first.finished_at <= analysis.sent_at < second.started_at, (
        first.finished_at, analysis.sent_at, second.started_at)
    assert ranked < second.started_at
    assert verified and max(verified) < second.started_at, (verified, second.started_at)
    engine.dispose()
