"""Ships a running step's log to the database in chunks, so the API on any machine can page
and follow it while the worker writes it (the worker's disk is its own).

The sink hands over the bytes it wrote (``append``: a buffer append, never I/O); a thread
stores what has gathered every ``every_s`` seconds, or sooner once ``batch_bytes`` are
waiting, one row per batch. Streaming is best effort: a database outage keeps the bytes
waiting for the next try, and the step never fails because of it; the log stored when the
step ends is the record.
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError

from service.commands.log_chunks import append_log_chunk
from service.db import session_scope

log = logging.getLogger(__name__)

STREAM_EVERY_S = 1.0
STREAM_BATCH_BYTES = 64 * 1024
_MAX_ROW_BYTES = 1024 * 1024  # a backlog (after an outage) goes in rows of at most this
_JOIN_S = 10.0  # a hung database must not hold the step's close for long


class LogStream:
    def __init__(
        self,
        engine: Engine,
        step_id: int,
        *,
        every_s: float = STREAM_EVERY_S,
        batch_bytes: int = STREAM_BATCH_BYTES,
    ) -> None:
        self.engine = engine
        self.step_id = step_id
        self.every_s = every_s
        self.batch_bytes = batch_bytes
        self._pending = bytearray()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._seq = 0
        self._sent = 0  # bytes of the log stored so far
        self._gone = False  # the step row was replaced: nothing more is stored
        self._thread = threading.Thread(
            target=self._loop, name=f"logstream-{step_id}", daemon=True
        )

    def append(self, data: bytes) -> None:
        with self._lock:
            if self._gone:
                return
            self._pending += data
            full = len(self._pending) >= self.batch_bytes
            if not self._thread.is_alive() and not self._stop.is_set():
                self._thread.start()  # on the first bytes: a silent step costs no thread
        if full:
            self._wake.set()

    def close(self) -> None:
        """Store what is still waiting and stop."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(_JOIN_S)

    @property
    def sent_bytes(self) -> int:
        return self._sent

    def _loop(self) -> None:
        while not self._stop.is_set():
            woken = self._wake.wait(self.every_s)
            self._wake.clear()
            # A wake is for a whole batch (and one raised by bytes appended while a row was
            # being stored counted that row's too); the timer stores whatever waits.
            self._flush(least=self.batch_bytes if woken else 1)
        self._flush(least=1)

    def _flush(self, *, least: int) -> None:
        """Store rows while at least ``least`` bytes wait."""
        while True:
            with self._lock:
                if self._gone or len(self._pending) < least:
                    return
                data = bytes(self._pending[:_MAX_ROW_BYTES])
            try:
                with session_scope(self.engine) as s:
                    append_log_chunk(s, self.step_id, self._seq, self._sent, data)
            except IntegrityError:
                # A newer attempt deleted this step (the lease was lost): nowhere to write.
                with self._lock:
                    self._gone = True
                    self._pending.clear()
                return
            except DBAPIError as exc:
                log.warning("step %s: log streaming paused: %s", self.step_id, exc)
                return  # the bytes stay waiting for the next try
            with self._lock:
                del self._pending[: len(data)]
            self._seq += 1
            self._sent += len(data)
