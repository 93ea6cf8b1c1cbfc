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
    if not running and step.log_compressed is not None:
        return _slice_bytes(step.read_log(), offset, limit, tail, complete=True)
    if step.log_path and os.path.isfile(step.log_path):
        return _slice_file(step.log_path, offset, limit, tail, complete=not running)
    return LogSlice(b"", 0, 0, complete=not running)


def _slice_bytes(
    data: bytes, offset: int | None, limit: int | None, tail: int | None, *, complete: bool
) -> LogSlice:
    if tail is not None:
        start = _tail_start(data, tail)
        return LogSlice(data[start:], start, len(data), complete)
    start = min(offset or 0, len(data))
    end = len(data) if limit is None else start + limit
    return LogSlice(data[start:end], start, len(data), complete)


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
