"""Reading a running step's streamed log (``LogChunk``) by byte range or from its end."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.models import LogChunk

_PAGE = 16  # chunks per query when walking back from the end


def streamed_size(session: Session, step_id: int) -> int:
    """How many bytes of the step's log have reached the database."""
    size = session.scalar(select(func.max(LogChunk.stop)).where(LogChunk.step_id == step_id))
    return int(size or 0)


def streamed_range(session: Session, step_id: int, start: int, end: int) -> bytes:
    """Bytes ``start`` to ``end`` of what has been streamed (fewer if less has)."""
    if end <= start:
        return b""
    rows = session.execute(
        select(LogChunk.start, LogChunk.data)
        .where(LogChunk.step_id == step_id, LogChunk.stop > start, LogChunk.start < end)
        .order_by(LogChunk.seq)
    ).all()
    return b"".join(data[max(0, start - at) : end - at] for at, data in rows)


def streamed_backwards(session: Session, step_id: int) -> Iterator[tuple[int, bytes]]:
    """The chunks as (start, data), last first, fetched a page at a time: a tail of a long
    log reads the last few chunks, not all of them."""
    before: int | None = None
    while True:
        query = select(LogChunk.seq, LogChunk.start, LogChunk.data).where(
            LogChunk.step_id == step_id
        )
        if before is not None:
            query = query.where(LogChunk.seq < before)
        rows = session.execute(query.order_by(LogChunk.seq.desc()).limit(_PAGE)).all()
        if not rows:
            return
        for seq, at, data in rows:
            before = seq
            yield at, data
