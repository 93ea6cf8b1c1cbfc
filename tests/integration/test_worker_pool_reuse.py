"""A worker's pool process serves a night's tasks without being replaced.

Every run queues three bookkeeping tasks after it (outbox, bisection, notifications), so a
pool process replaced after a fixed number of tasks was replaced every dozen runs, and its
worker slot stood idle while the next message waited for the new process (~1.7 s each
time, benchmarks/nightly_slo.py). A real prefork worker with one pool process takes more
tasks than the old limit of 50; they must all run in the same process.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from celery import Celery

from service.db import make_engine
from service.migrate import upgrade
from tests.support import redis_dbs
from tests.support.processes import Processes, celery_worker
from tests.support.waiting import empty_broker, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.slow]

REDIS_URL = redis_dbs.url(redis_dbs.POOL_REUSE)
TASKS = 120  # more than twice the old limit of 50 tasks per pool process


def test_one_pool_process_serves_many_bookkeeping_tasks(tmp_path: Path) -> None:
    broker = empty_broker(REDIS_URL)
    db_url = f"sqlite:///{tmp_path / 'ootci.db'}"
    engine = make_engine(db_url)
    upgrade(engine)
    engine.dispose()
    env = {**os.environ, "OOTCI_HOME": str(tmp_path / "home"), "OOTCI_DATABASE_URL": db_url,
           "OOTCI_BROKER_URL": REDIS_URL, "PYTHONUNBUFFERED": "1"}
    procs = Processes(tmp_path / "logs")
    try:
        procs.start("worker", celery_worker("pool-reuse"), env)
        client = Celery(broker=REDIS_URL)
        for _ in range(TASKS):
            client.send_task("ootci.bisect.advance", queue="ootci")
        log = tmp_path / "logs" / "worker.log"
        wait_until(lambda: len(_succeeded(log)) >= TASKS, 120,
                   lambda: f"{len(_succeeded(log))} of {TASKS} tasks done\n{procs.tail(2000)}")
        succeeded = _succeeded(log)
        assert len(succeeded) == TASKS
        assert set(succeeded) == {"ForkPoolWorker-1"}, procs.tail(2000)
    finally:
        procs.stop()
        broker.flushdb()
        broker.close()


def _succeeded(log: Path) -> list[str]:
    """The pool process name of each task that succeeded, in the worker's log."""
    text = log.read_text() if log.exists() else ""
    return re.findall(r"INFO/(ForkPoolWorker-\d+)\] Task ootci\.bisect\.advance\[[^\]]+\] "
                      r"succeeded", text)
