"""Where a stored log's lines lie in its compressed bytes, so a page in the middle of a
200 MB log is inflated from the nearest point before it, not from the log's start. Pure.

The log is one zlib stream (any zlib reader inflates it whole), fully flushed every
``SEGMENT`` bytes of log: at a full flush the deflate stream is byte-aligned and its
dictionary reset, so raw inflate (``wbits=-15``) can start at that byte with nothing
before it. The index keeps, per flush point, the newlines before it, its offset in the log
and its offset in the compressed bytes. A flush per MiB costs the ratio well under 1 %.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

SEGMENT = 1 << 20
LEVEL = 6
# Inflating from a flush point: a raw deflate stream, no zlib header.
RAW_DEFLATE = -15


@dataclass(frozen=True)
class SeekPoint:
    newlines_before: int  # newlines in the log before ``offset``
    offset: int  # where the point is in the log
    compressed: int  # where its deflate blocks start in the compressed bytes


def compress_indexed(data: bytes, segment: int = SEGMENT) -> tuple[bytes, list[list[int]]]:
    """``data`` as one zlib stream flushed every ``segment`` bytes, and its index: one
    ``[newlines_before, offset, compressed]`` per flush point after the first byte (the
    start needs none: it is read as the zlib stream it is)."""
    if segment < 1:
        raise ValueError(f"segment must be positive, not {segment}")
    packer = zlib.compressobj(LEVEL)
    out = bytearray()
    index: list[list[int]] = []
    newlines = 0
    for at in range(0, len(data), segment):
        if at:
            index.append([newlines, at, len(out)])
        piece = data[at : at + segment]
        out += packer.compress(piece)
        out += packer.flush(zlib.Z_FULL_FLUSH)
        newlines += piece.count(b"\n")
    out += packer.flush()
    return bytes(out), index


def seek_point(index: list[list[int]] | None, line: int) -> SeekPoint | None:
    """The last flush point at which line ``line`` (1-based) has not started yet, so that
    skipping ``line - 1 - newlines_before`` newlines from it lands on that line's first
    byte; None: read from the log's start."""
    best: SeekPoint | None = None
    for newlines, offset, compressed in index or ():
        if newlines >= line - 1:
            break  # the line's start is at or before this point (it may be mid-line)
        best = SeekPoint(newlines, offset, compressed)
    return best
