"""The stored log's seek index (``service/domain/log_index.py``): still one zlib stream,
and from every flush point the rest of the log inflates alone, as raw deflate, to exactly
the bytes after that point; the seek point for a line is the last one before that line
starts."""

from __future__ import annotations

import zlib

import pytest

from service.domain.log_index import RAW_DEFLATE, compress_indexed, seek_point

LOG = b"".join(b"line %d %s\n" % (i, b"x" * (i % 50)) for i in range(3_000)) + b"tail"


def test_the_indexed_log_is_one_zlib_stream_and_each_point_inflates_alone() -> None:
    packed, index = compress_indexed(LOG, segment=1000)
    assert zlib.decompress(packed) == LOG
    assert [offset for _, offset, _ in index] == list(range(1000, len(LOG), 1000))
    for newlines, offset, compressed in index:
        assert newlines == LOG[:offset].count(b"\n")
        rest = zlib.decompressobj(RAW_DEFLATE).decompress(packed[compressed:])
        assert rest == LOG[offset:]


def test_the_seek_point_is_the_last_before_the_line_starts() -> None:
    _, index = compress_indexed(LOG, segment=1000)
    assert seek_point(index, 1) is None
    for line in (2, 40, 41, 1_500, 3_001):
        point = seek_point(index, line)
        offset, before = (point.offset, point.newlines_before) if point else (0, 0)
        assert before < line - 1 or offset == 0  # the line starts after the point
        later = [p for p in index if p[1] > offset]
        assert not later or later[0][0] >= line - 1  # and no later point would do
        start = LOG[offset:]
        for _ in range(line - 1 - before):
            start = start[start.index(b"\n") + 1:]
        assert start.startswith(b"line %d " % (line - 1) if line <= 3_000 else b"tail")
    assert seek_point(index, 1_500) is not None


def test_an_unindexed_log_and_a_bad_segment() -> None:
    assert seek_point(None, 500) is None
    with pytest.raises(ValueError, match="segment must be positive"):
        compress_indexed(LOG, segment=0)
