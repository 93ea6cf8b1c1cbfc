"""Reading a step's log a piece at a time: a running step's streamed chunks (``LogChunk``)
by byte range or from its end, and an ended step's stored, compressed log in slices."""

from __future__ import annotations

import zlib
from collections.abc import Iterator

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.domain.log_index import RAW_DEFLATE
from service.models import LogChunk, Step

# What one query reads of the stored compressed log, and the largest inflated piece: a
# reader holds about one of each, whatever the log's size (8 views of a 200 MB log must
# fit a 1 GiB API pod).
COMPRESSED_SLICE = 64 * 1024
PIECE = 256 * 1024
_CHUNKS_PER_QUERY = 64

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


def streamed_pieces(session: Session, step_id: int, end: int, start: int = 0) -> Iterator[bytes]:
    """Bytes ``start`` to ``end`` of the streamed log, in order, a few chunks per query at
    first and more as the reader keeps reading: a log page wants a chunk or two, a download
    all of them (every row of a query is in hand at once)."""
    after = -1
    at = start
    batch = 2
    while at < end:
        rows = session.execute(
            select(LogChunk.seq, LogChunk.start, LogChunk.data)
            .where(LogChunk.step_id == step_id, LogChunk.seq > after, LogChunk.stop > start)
            .order_by(LogChunk.seq).limit(batch)
        ).all()
        batch = min(batch * 2, _CHUNKS_PER_QUERY)
        if not rows:
            return
        for seq, start, data in rows:
            after = seq
            piece = data[max(0, at - start) : end - start]
            if piece:
                at = start + max(0, at - start) + len(piece)
                yield piece
            if at >= end:
                return


def streamed_seek(session: Session, step_id: int, line: int, size: int) -> tuple[int, int]:
    """Where to start reading the streamed log (its first ``size`` bytes) for line
    ``line`` (1-based): the start of the chunk holding the newline before that line, and
    the newlines before that chunk, from the chunks' counts alone (no chunk is read). A
    chunk written uncounted makes it (0, 0): read from the start."""
    if line <= 1:
        return 0, 0
    before = func.sum(LogChunk.newlines).over(order_by=LogChunk.seq)
    running = (
        select(LogChunk.start.label("start"), LogChunk.newlines.label("newlines"),
               before.label("upto"))
        .where(LogChunk.step_id == step_id, LogChunk.stop <= size)
        .subquery()
    )
    found = session.execute(
        select(running.c.start, running.c.upto - running.c.newlines)
        .where(running.c.upto >= line - 1).order_by(running.c.start).limit(1)
    ).first()
    if found is None or found[1] is None:
        return 0, 0
    return int(found[0]), int(found[1])


def stored_pieces(
    session: Session, step_id: int, *, piece: int = PIECE, start: int | None = None,
) -> Iterator[bytes]:
    """The stored log inflated in pieces of at most ``piece`` bytes; from ``start``, a
    flush point's offset in the compressed bytes (``domain/log_index.py``), as raw deflate
    from there. The compressed column is read in slices, never loaded whole: its size is a
    tenth of the log's or more, and every concurrent reader would hold one."""
    inflater = zlib.decompressobj() if start is None else zlib.decompressobj(RAW_DEFLATE)
    for data in _compressed_slices(session, step_id, start or 0):
        pending = data
        while pending and not inflater.eof:
            out = inflater.decompress(pending, piece)
            pending = inflater.unconsumed_tail
            if out:
                yield out
        if inflater.eof:
            return  # the deflate stream's end (a raw one's is followed by zlib's trailer)
    rest = inflater.flush()
    if rest:
        yield rest


def _compressed_slices(session: Session, step_id: int, start: int = 0) -> Iterator[bytes]:
    if session.get_bind().dialect.name == "sqlite":
        yield from _sqlite_blob_slices(session, step_id, start)
        return
    # Postgres returns just the slice (substring of a bytea, de-TOASTed server-side).
    position = start + 1  # substr counts from 1
    while True:
        data = session.scalar(
            select(func.substr(Step.log_compressed, position, COMPRESSED_SLICE))
            .where(Step.id == step_id)
        )
        if not data:
            return
        position += len(data)
        yield bytes(data)
        if len(data) < COMPRESSED_SLICE:
            return


def _sqlite_blob_slices(session: Session, step_id: int, start: int = 0) -> Iterator[bytes]:
    """SQLite's substr() reads the whole value for every slice; its incremental blob I/O
    reads only the pages asked for."""
    # length() reads the value's header only; "IS NULL" would load the whole blob.
    if not session.scalar(select(func.length(Step.log_compressed)).where(Step.id == step_id)):
        return
    raw = session.connection().connection.driver_connection
    assert raw is not None
    with raw.blobopen("steps", "log_compressed", step_id, readonly=True) as blob:
        blob.seek(start)
        while data := blob.read(COMPRESSED_SLICE):
            yield data


def streamed_line_count(session: Session, step_id: int, size: int) -> int | None:
    """Lines in the first ``size`` bytes of the streamed log, from the chunks' newline
    counts (an unfinished last line counts); None if a chunk was written uncounted or
    ``size`` is not a chunk boundary."""
    counted, chunks, newlines = session.execute(
        select(func.count(LogChunk.newlines), func.count(), func.sum(LogChunk.newlines))
        .where(LogChunk.step_id == step_id, LogChunk.stop <= size)
    ).one()
    if counted != chunks:
        return None
    # By seq (the key), not stop: ordering by an unindexed column reads every row.
    last = session.execute(
        select(LogChunk.stop, LogChunk.data).where(LogChunk.step_id == step_id)
        .order_by(LogChunk.seq.desc()).where(LogChunk.stop <= size).limit(1)
    ).first()
    if last is None:
        return 0 if size == 0 else None
    if last.stop != size:
        return None
    return int(newlines or 0) + (0 if last.data.endswith(b"\n") else 1)
