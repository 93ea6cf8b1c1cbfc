"""Dispatchers: the in-process pool, and the broker client that sends tasks by name."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator

import pytest
import redis

from service.dispatch import BrokerUnavailable, CeleryDispatcher, InProcessDispatcher
from tests.support import redis_dbs

REDIS_URL = redis_dbs.url(redis_dbs.DISPATCH)


def test_in_process_dispatcher_runs_the_executor_off_the_calling_thread() -> None:
    seen: list[tuple[int, str]] = []
    done = threading.Event()

    def executor(run_id: int) -> None:
        seen.append((run_id, threading.current_thread().name))
        done.set()

    dispatcher = InProcessDispatcher(executor)
    dispatcher.enqueue_run(7)
    assert done.wait(5)
    dispatcher.close()
    assert seen[0][0] == 7
    assert seen[0][1].startswith("ootci-run")


def test_in_process_dispatcher_survives_a_failing_run(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []

    def executor(run_id: int) -> None:
        calls.append(run_id)
        if run_id == 1:
            raise RuntimeError("boom")

    dispatcher = InProcessDispatcher(executor, max_workers=1)
    dispatcher.enqueue_run(1)
    dispatcher.enqueue_run(2)
    dispatcher.close()
    assert calls == [1, 2]
    assert "in-process run 1 raised" in caplog.text


@pytest.fixture
def broker() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.skip("Redis is not running")
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


@pytest.mark.redis
def test_celery_dispatcher_sends_the_execute_task_by_name_with_a_json_id(
    broker: redis.Redis,
) -> None:
    dispatcher = CeleryDispatcher(REDIS_URL)
    dispatcher.check()
    dispatcher.enqueue_run(42)
    dispatcher.close()
    raw = broker.lrange("ootci", 0, -1)
    assert len(raw) == 1
    message = json.loads(raw[0])
    assert message["headers"]["task"] == "ootci.run.execute"
    assert message["content-type"] == "application/json"
    args, kwargs, _embed = json.loads(base64.b64decode(message["body"]))
    assert (args, kwargs) == ([42], {})


def test_celery_dispatcher_check_names_the_unreachable_broker() -> None:
    dispatcher = CeleryDispatcher("redis://127.0.0.1:1/0", connect_timeout_s=0.5)
    with pytest.raises(BrokerUnavailable, match="127.0.0.1:1"):
        dispatcher.check()


def test_the_api_package_does_not_import_workers() -> None:
    """The API enqueues by task name; importing it must not pull in the worker code."""
    import subprocess
    import sys

    code = (
        "import sys, service.api.app, service.dispatch; "
        "bad = sorted(m for m in sys.modules if m == 'workers' or m.startswith('workers.')); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
