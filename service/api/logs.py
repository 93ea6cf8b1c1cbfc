"""Reading a step's log by byte range or by last lines, from the database once the step
has ended, from the file it streams to while it runs."""

from __future__ import annotations

import os
from dataclasses import dataclass

from service.models import Step, StepStatus

_BLOCK = 64 * 1024


@dataclass(frozen=True)
class LogSlice:
    data: bytes
    offset: int  # where ``data`` starts in the log
    size: int  # the log's size as of this read
    complete: bool  # False while the step is still writing it


def read_log(step: Step, *, offset: int | None, limit: int | None, tail: int | None) -> LogSlice:
    running = step.status in (StepStatus.RUNNING, StepStatus.PENDING)
    # log_size is set with the stored log; testing it does not load the deferred columns.
    if not running and step.log_size is not None:
        if tail is not None:
            return _stored_tail(step, step.log_size, tail)
        return _stored_range(step, step.log_size, offset or 0, limit)
    if step.log_path and os.path.isfile(step.log_path):
        return _slice_file(step.log_path, offset, limit, tail, complete=not running)
    return LogSlice(b"", 0, 0, complete=not running)


def _stored_tail(step: Step, size: int, lines: int) -> LogSlice:
    """The last ``lines`` lines: from the stored tail when it holds them, else by inflating
    the log piece by piece, keeping only as much of the end as those lines need."""
    held = step.log_tail
    if held is not None and (len(held) == size or _enough_lines(held, lines)):
        cut = _tail_start(held, lines)
        return LogSlice(held[cut:], size - len(held) + cut, size, True)
    window = b""
    for piece in step.iter_log():
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
    for piece in step.iter_log():
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


def _slice_file(
    path: str, offset: int | None, limit: int | None, tail: int | None, *, complete: bool
) -> LogSlice:
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if tail is not None:
            # Read backwards block by block until enough newlines are in hand: a tail of a
            # 100 MB build log costs a few blocks, not the whole file.
            start = size
            chunk = b""
            while start > 0 and chunk.count(b"\n") <= tail:
                step = min(_BLOCK, start)
                start -= step
                fh.seek(start)
                chunk = fh.read(step) + chunk
            cut = _tail_start(chunk, tail)
            return LogSlice(chunk[cut:], start + cut, size, complete)
        start = min(offset or 0, size)
        fh.seek(start)
        data = fh.read(size - start if limit is None else min(limit, size - start))
        return LogSlice(data, start, size, complete)
