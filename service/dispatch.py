"""How the HTTP edge (and the scheduler) hand a run to whoever executes it.

The API never imports ``workers``: with a broker it sends the task by its stable name;
without one (the embedded default) the composition root gives it a callable that runs
the pipeline on a small thread pool in this process. Callers enqueue only after the
commit that created the run row, so a worker never looks for a row that is not there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

log = logging.getLogger(__name__)

EXECUTE_TASK = "ootci.run.execute"


class BrokerUnavailable(RuntimeError):
    """The broker cannot be reached; the message says which and why."""


class Dispatcher(Protocol):
    def enqueue_run(self, run_id: int) -> None: ...

    def check(self) -> None:
        """Raise BrokerUnavailable when runs could not be enqueued right now."""
        ...

    def close(self) -> None: ...


class CeleryDispatcher:
    """Sends ``ootci.run.execute`` through the broker with a bare Celery client."""

    def __init__(self, broker_url: str, *, connect_timeout_s: float = 2.0) -> None:
        from celery import Celery

        self.broker_url = broker_url
        self._connect_timeout_s = connect_timeout_s
        self._client = Celery("ootci-client", broker=broker_url, set_as_current=False)
        self._client.conf.update(
            task_serializer="json",
            accept_content=["json"],
            task_default_queue="ootci",
            broker_connection_timeout=connect_timeout_s,
            broker_connection_retry_on_startup=False,
            # Fail fast rather than hang a request: the run row exists and the sweeper
            # re-dispatches it if this publish is lost.
            broker_transport_options={"max_retries": 1, "socket_timeout": 5},
        )

    def enqueue_run(self, run_id: int) -> None:
        self._client.send_task(
            EXECUTE_TASK, args=[run_id], retry=True, retry_policy={"max_retries": 2}
        )

    def check(self) -> None:
        try:
            with self._client.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, timeout=self._connect_timeout_s)
        except Exception as exc:
            from kombu.utils.url import maybe_sanitize_url

            raise BrokerUnavailable(
                f"cannot reach broker {maybe_sanitize_url(self.broker_url)}: {exc}"
            ) from None

    def close(self) -> None:
        self._client.close()


class InProcessDispatcher:
    """Runs ``executor(run_id)`` on a small thread pool: no broker, no worker process."""

    def __init__(self, executor: Callable[[int], object], *, max_workers: int = 2) -> None:
        self._executor = executor
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="ootci-run")

    def enqueue_run(self, run_id: int) -> None:
        future = self._pool.submit(self._executor, run_id)
        future.add_done_callback(lambda f: _log_failure(run_id, f))

    def check(self) -> None:
        return None

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=False)


def _log_failure(run_id: int, future: Future[object]) -> None:
    exc = future.exception()
    if exc is not None:
        log.error("in-process run %s raised", run_id, exc_info=exc)
