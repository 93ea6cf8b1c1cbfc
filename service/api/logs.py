"""Reading a step's log by byte range or by last lines: the stored, compressed log once the
step has ended, the chunks the worker streams to the database while it runs. Never the
worker's disk: the API may run on another machine."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlalchemy.orm import Session, object_session

from service.domain.log_index import seek_point
from service.models import Step, StepStatus
from service.queries.log_chunks import (
    stored_pieces,
    streamed_backwards,
    streamed_line_count,
    streamed_pieces,
    streamed_range,
    streamed_seek,
    streamed_size,
)


@dataclass(frozen=True)
class LogSlice:
    data: bytes
    offset: int  # where ``data`` starts in the log
    size: int  # the log's size as of this read
    complete: bool  # False while the step is still writing it


@dataclass(frozen=True)
class LogStream:
    """A whole log, a piece at a time: what a download or a page reads through, holding
    one piece (and the database one slice) at a time."""

    pieces: Iterator[bytes]
    size: int  # the log's size as of this read
    complete: bool


def stream_log(step: Step, engine: Engine | None = None) -> LogStream:
    """The log of ``step``, read through its own session. With ``engine`` the pieces are
    read in a session of their own, opened and closed by the iterator: a streamed response
    is sent after the request's session may be gone."""
    running = step.status in (StepStatus.RUNNING, StepStatus.PENDING)
    session = object_session(step)
    if session is None:
        return LogStream(step.iter_log(), step.log_size or 0, not running)
    if not running and step.log_size is not None:
        return LogStream(_in_session(engine, session, stored_pieces, step.id), step.log_size, True)
    size = streamed_size(session, step.id)
    pieces = _in_session(engine, session, lambda s, i: streamed_pieces(s, i, size), step.id)
    return LogStream(pieces, size, not running)


def _in_session(
    engine: Engine | None,
    session: Session,
    read: Callable[[Session, int], Iterator[bytes]],
    step_id: int,
) -> Iterator[bytes]:
    if engine is None:
        yield from read(session, step_id)
        return
    with Session(engine) as own:
        yield from read(own, step_id)


def _pieces(step: Step) -> Iterator[bytes]:
    """The stored log inflated piece by piece, its compressed bytes read in slices."""
    session = object_session(step)
    return stored_pieces(session, step.id) if session is not None else step.iter_log()


def read_log(step: Step, *, offset: int | None, limit: int | None, tail: int | None) -> LogSlice:
    running = step.status in (StepStatus.RUNNING, StepStatus.PENDING)
    # log_size is set with the stored log; testing it does not load the deferred columns.
    if not running and step.log_size is not None:
        if tail is not None:
            return _stored_tail(step, step.log_size, tail)
        return _stored_range(step, step.log_size, offset or 0, limit)
    session = object_session(step)
    if session is None:
        return LogSlice(b"", 0, 0, complete=not running)
    return _streamed(session, step.id, offset, limit, tail, complete=not running)


def _stored_tail(step: Step, size: int, lines: int) -> LogSlice:
    """The last ``lines`` lines: from the stored tail when it holds them, else by inflating
    the log piece by piece, keeping only as much of the end as those lines need."""
    held = step.log_tail
    if held is not None and (len(held) == size or _enough_lines(held, lines)):
        cut = _tail_start(held, lines)
        return LogSlice(held[cut:], size - len(held) + cut, size, True)
    window = b""
    for piece in _pieces(step):
        window += piece
        if _enough_lines(window, lines):
            # Keep from the line before the wanted ones: the rest can never be shown.
            window = window[_tail_start(window, lines + 1) :]
    cut = _tail_start(window, lines)
    return LogSlice(window[cut:], size - len(window) + cut, size, True)


def _enough_lines(data: bytes, lines: int) -> bool:
    # One newline more than asked for: the first line of the data may be a partial one.
    return data.count(b"\n") > lines


def _stored_range(step: Step, size: int, offset: int, limit: int | None) -> LogSlice:
    """Bytes ``offset`` to ``offset + limit``, inflating only up to where they end."""
    start = min(offset, size)
    end = size if limit is None else min(size, start + limit)
    wanted: list[bytes] = []
    at = 0
    for piece in _pieces(step):
        if at + len(piece) > start:
            wanted.append(piece[max(0, start - at) : end - at])
        at += len(piece)
        if at >= end:
            break
    return LogSlice(b"".join(wanted), start, size, True)


def _tail_start(data: bytes, lines: int) -> int:
    """Offset of the first of the last ``lines`` lines (a trailing newline ends a line)."""
    end = len(data) - 1 if data.endswith(b"\n") else len(data)
    pos = end
    for _ in range(lines):
        pos = data.rfind(b"\n", 0, pos)
        if pos < 0:
            return 0
    return pos + 1


def _streamed(
    session: Session,
    step_id: int,
    offset: int | None,
    limit: int | None,
    tail: int | None,
    *,
    complete: bool,
) -> LogSlice:
    size = streamed_size(session, step_id)
    if tail is not None:
        return _streamed_tail(session, step_id, size, tail, complete=complete)
    start = min(offset or 0, size)
    end = size if limit is None else min(size, start + limit)
    return LogSlice(streamed_range(session, step_id, start, end), start, size, complete)


def _streamed_tail(session: Session, step_id: int, size: int, lines: int, *,
                   complete: bool) -> LogSlice:
    """The last ``lines`` lines of the first ``size`` bytes, walking back chunk by chunk
    until enough newlines are in hand (chunks written since ``size`` was read are left out)."""
    start, window = size, b""
    for at, data in streamed_backwards(session, step_id):
        if at >= size:
            continue
        start, window = at, data[: size - at] + window
        if _enough_lines(window, lines):
            break
    cut = _tail_start(window, lines)
    return LogSlice(window[cut:], start + cut, size, complete)


def line_count(step: Step) -> int | None:
    """How many lines the step's log has, without reading it; None if never counted."""
    running = step.status in (StepStatus.RUNNING, StepStatus.PENDING)
    if not running and step.log_size is not None:
        return step.log_lines
    session = object_session(step)
    if session is None:
        return None
    return streamed_line_count(session, step.id, streamed_size(session, step.id))


def read_last_page(step: Step, per_page: int) -> tuple[LogSlice, int] | None:
    """The lines of the log's last page of ``per_page`` lines and how many lines the log
    has, read from its end: the stored tail, or the last streamed chunks. None when the
    log's lines were never counted (stored before they were): page it by reading through."""
    running = step.status in (StepStatus.RUNNING, StepStatus.PENDING)
    if not running and step.log_size is not None:
        if step.log_lines is None:
            return None
        return _stored_tail(step, step.log_size, _last_page_lines(step.log_lines, per_page)), \
            step.log_lines
    session = object_session(step)
    if session is None:
        return None
    size = streamed_size(session, step.id)
    total = streamed_line_count(session, step.id, size)
    if total is None:
        return None
    return _streamed_tail(session, step.id, size, _last_page_lines(total, per_page),
                          complete=not running), total


@dataclass(frozen=True)
class PageRead:
    """What a page of a log is read from (``pages/logview.page_from``): ``pieces`` start
    ``skip`` newlines before the page's first line; the log has ``total`` lines and
    ``size`` bytes as of this read."""

    pieces: Iterator[bytes]
    skip: int
    total: int
    size: int


def read_page(step: Step, first_line: int) -> PageRead | None:
    """Where the page starting at line ``first_line`` (1-based) is read from, without
    reading what comes before it: an ended step's log inflated from the nearest flush
    point before that line (``steps.log_index``; a log stored unindexed, from its start,
    up to the page only), a running step's from the chunk holding the newline before it
    (``log_chunks.newlines``). None when the log's lines were never counted: page it by
    reading through."""
    running = step.status in (StepStatus.RUNNING, StepStatus.PENDING)
    session = object_session(step)
    if session is None:
        return None
    if not running and step.log_size is not None:
        if step.log_lines is None:
            return None
        point = seek_point(step.log_index, first_line)
        pieces = stored_pieces(session, step.id, start=point.compressed if point else None)
        before = point.newlines_before if point else 0
        return PageRead(pieces, first_line - 1 - before, step.log_lines, step.log_size)
    size = streamed_size(session, step.id)
    total = streamed_line_count(session, step.id, size)
    if total is None:
        return None
    start, before = streamed_seek(session, step.id, first_line, size)
    return PageRead(streamed_pieces(session, step.id, size, start), first_line - 1 - before,
                    total, size)


def _last_page_lines(total: int, per_page: int) -> int:
    return total - (max(1, -(-total // per_page)) - 1) * per_page
