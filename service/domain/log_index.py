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


class IndexedCompressor:
    """``compress_indexed`` fed in pieces: a log that is read as it is inflated (one stored
    before it was indexed) is indexed without holding it whole. Also counts its lines as
    a log page does (one per newline, and an unfinished last line)."""

    def __init__(self, segment: int = SEGMENT) -> None:
        if segment < 1:
            raise ValueError(f"segment must be positive, not {segment}")
        self._segment = segment
        self._packer = zlib.compressobj(LEVEL)
        self._out = bytearray()
        self._pending = bytearray()  # the current segment's bytes not yet compressed
        self._fed = 0  # bytes of log before ``_pending``
        self._newlines = 0
        self._last = b""
        self.index: list[list[int]] = []

    def feed(self, data: bytes) -> None:
        if data:
            self._last = data[-1:]
        self._pending += data
        while len(self._pending) >= self._segment:
            self._segment_done(bytes(self._pending[: self._segment]))
            del self._pending[: self._segment]

    def _segment_done(self, piece: bytes) -> None:
        if self._fed:
            self.index.append([self._newlines, self._fed, len(self._out)])
        self._out += self._packer.compress(piece)
        self._out += self._packer.flush(zlib.Z_FULL_FLUSH)
        self._newlines += piece.count(b"\n")
        self._fed += len(piece)

    def finish(self) -> tuple[bytes, list[list[int]], int]:
        """The zlib stream, its index and the log's line count."""
        if self._pending:
            self._segment_done(bytes(self._pending))
            self._pending.clear()
        self._out += self._packer.flush()
        lines = self._newlines + (1 if self._last not in (b"", b"\n") else 0)
        return bytes(self._out), self.index, lines


def compress_indexed(data: bytes, segment: int = SEGMENT) -> tuple[bytes, list[list[int]]]:
    """``data`` as one zlib stream flushed every ``segment`` bytes, and its index: one
    ``[newlines_before, offset, compressed]`` per flush point after the first byte (the
    start needs none: it is read as the zlib stream it is)."""
    packer = IndexedCompressor(segment)
    packer.feed(data)
    compressed, index, _ = packer.finish()
    return compressed, index


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
