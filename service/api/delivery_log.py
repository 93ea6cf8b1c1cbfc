"""Group commit for webhook deliveries that queue nothing (most of GitHub's traffic).

Each such delivery is one row. Written one transaction per request, the server spends its
time on round trips and WAL flushes; here concurrent requests hand their rows to a single
writer that inserts whatever has accumulated in one statement and one commit, while the
previous batch was being flushed. A request still answers only after its row is
committed. Deduplication stays in the database: ``ON CONFLICT (delivery_id) DO NOTHING``
plus RETURNING says which rows were new.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import OperationalError
from starlette.concurrency import run_in_threadpool

from service.models import WebhookDelivery

MAX_BATCH = 256

_Item = tuple[dict[str, Any], "asyncio.Future[bool]"]


class DeliveryRecorder:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._queue: asyncio.Queue[_Item] | None = None
        self._writer: asyncio.Task[None] | None = None

    async def record(self, row: dict[str, Any]) -> bool:
        """Store one delivery row; False if its delivery id was already stored."""
        if self._queue is None or self._writer is None or self._writer.done():
            # Created lazily, inside the event loop that serves the requests.
            self._queue = asyncio.Queue()
            self._writer = asyncio.create_task(self._drain(self._queue))
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((row, future))
        return await future

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer

    async def _drain(self, queue: asyncio.Queue[_Item]) -> None:
        while True:
            batch = [await queue.get()]
            while len(batch) < MAX_BATCH and not queue.empty():
                batch.append(queue.get_nowait())
            try:
                new = await run_in_threadpool(self._write, [row for row, _ in batch])
            except OperationalError as exc:  # the database is down: nobody's row is stored
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            except Exception:
                # One row the database refuses must not sink the others: write them one by
                # one, and only the offending request learns why.
                new = set()
                for row, future in batch:
                    try:
                        new |= await run_in_threadpool(self._write, [row])
                    except Exception as exc:
                        future.set_exception(exc)
            seen: set[str] = set()
            for row, future in batch:
                delivery = row["delivery_id"]
                # Two copies of one delivery in a batch: the first one is the new one.
                is_new = delivery in new and delivery not in seen
                seen.add(delivery)
                if not future.done():
                    future.set_result(is_new)

    def _write(self, rows: list[dict[str, Any]]) -> set[str]:
        unique = list({row["delivery_id"]: row for row in reversed(rows)}.values())[::-1]
        insert = pg_insert if self._engine.dialect.name == "postgresql" else sqlite_insert
        stmt = (
            insert(WebhookDelivery)
            .values(unique)
            .on_conflict_do_nothing(index_elements=["delivery_id"])
            .returning(WebhookDelivery.delivery_id)
        )
        with self._engine.begin() as conn:
            return set(conn.scalars(stmt))
