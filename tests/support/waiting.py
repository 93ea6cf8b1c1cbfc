"""Waiting in tests: the one polling loop (``wait_until``), and a Redis database to use as a
broker, emptied first."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis


def wait_until(
    predicate: Callable[[], Any],
    timeout: float,
    what: str | Callable[[], str],
    every: float = 0.2,
) -> Any:
    """The predicate's first truthy value, asked every ``every`` seconds for ``timeout``
    seconds; then an AssertionError naming ``what`` (a callable is called only on a
    timeout, so the logs it shows are those of then). A predicate may assert itself (a
    process it needs died) to fail at once."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(
        f"timed out after {timeout}s waiting for {what if isinstance(what, str) else what()}"
    )


def empty_broker(url: str) -> redis.Redis:
    """The Redis database at ``url``, emptied; the test is skipped when Redis is not running."""
    broker = redis.Redis.from_url(url)
    try:
        broker.ping()
    except redis.ConnectionError:
        pytest.skip("Redis is not running")
    broker.flushdb()
    return broker
