"""Any page of a step log is read from the nearest point before it (issue #33): an ended
step's log inflated from the flush point before the page (``steps.log_index``), a running
step's from the chunk holding the newline before it (``log_chunks.newlines``). Every page
must be the very page reading the whole log gives, the pages together the log, and what
lies before the seek point must never be read. SQLite and Postgres (``engine``)."""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.api.logs import read_page
from service.api.pages.logview import LINES_PER_PAGE, LogPage, page_from, paginate
from service.commands.log_chunks import append_log_chunk
from service.domain.log_index import SEGMENT, compress_indexed, seek_point
from service.models import LogChunk, Step
from service.queries.log_chunks import streamed_pieces, streamed_size
from tests.support.factories import make_backend, make_run


def _lines(n: int, width: int = 10, partial: bool = False) -> bytes:
    body = b"".join(b"%d:" % i + b"x" * (width + i % 7) + b"\n" for i in range(1, n + 1))
    return body + (b"unfinished" if partial else b"")


LOGS = {
    "empty": b"",
    "one-unfinished-line": b"no newline yet",
    "one-page-exactly": _lines(LINES_PER_PAGE),
    "a-page-and-one": _lines(LINES_PER_PAGE + 1),
    "cr-and-blank-lines": b"a\r\n\n\nprogress 10%\rprogress 90%\r\n" * 700,
    "long-with-partial-line": _lines(5_321, partial=True),
    "wide-lines": _lines(1_700, width=3_000),
    # A line longer than a page shows (cut) and than a seek segment or a chunk.
    "a-huge-line-mid-log": _lines(900) + b"y" * 200_000 + b"\n" + _lines(900),
}
SEGMENT_BYTES = 4096  # many seek points in a small log; the stored default is 1 MiB
CHUNK_BYTES = 3001  # chunks that end mid-line, and some on a newline


def _step(session: Session, status: str) -> Step:
    run = make_run(session, make_backend(session, "logs", "/src"), spec="installed",
                   state="running" if status == "running" else "failed")
    step = Step(run_id=run.id, name="build", status=status, log_path="/elsewhere/build.log")
    session.add(step)
    session.flush()
    return step


def _stored(engine: Engine, data: bytes, segment: int = SEGMENT_BYTES) -> int:
    with Session(engine) as s, s.begin():
        step = _step(s, "failed")
        step.store_log(data)  # the count, size and tail as the worker stores them
        step.log_compressed, step.log_index = compress_indexed(data, segment)
        return step.id


def _streamed(engine: Engine, data: bytes) -> int:
    with Session(engine) as s, s.begin():
        step = _step(s, "running")
        for seq, start in enumerate(range(0, len(data), CHUNK_BYTES)):
            append_log_chunk(s, step.id, seq, start, data[start : start + CHUNK_BYTES])
        return step.id


def _page(engine: Engine, step_id: int, page: int) -> LogPage:
    with Session(engine) as s:
        read = read_page(s.get_one(Step, step_id), (page - 1) * LINES_PER_PAGE + 1)
        assert read is not None
        return page_from(read.pieces, read.skip, page, read.total, read.size)


def _every_page(engine: Engine, step_id: int) -> list[LogPage]:
    first = _page(engine, step_id, 1)
    return [first, *(_page(engine, step_id, p) for p in range(2, first.pages + 1))]


def _shown(data: bytes) -> list[str]:
    """The log's lines as pages show them (b"\\n" only, a long line cut)."""
    return [line for p in range(1, paginate(data, 1).pages + 1) for line in paginate(data, p).lines]


@pytest.mark.parametrize("where", ["stored", "streamed"])
@pytest.mark.parametrize("name", LOGS)
def test_every_page_is_the_whole_reads_and_together_they_are_the_log(
    engine: Engine, name: str, where: str,
) -> None:
    data = LOGS[name]
    step_id = (_stored if where == "stored" else _streamed)(engine, data)
    pages = _every_page(engine, step_id)
    for view in pages:
        whole = paginate(data, view.page)
        assert (view.page, view.pages, view.first_line, view.lines, view.total_lines) == (
            whole.page, whole.pages, whole.first_line, whole.lines, whole.total_lines)
    assert [line for view in pages for line in view.lines] == _shown(data)
    if b"y" * 1000 not in data:  # no line was cut: the pages give the log back (a line's
        # closing \r aside, which a page drops)
        joined = "\n".join(line for view in pages for line in view.lines)
        ending = b"\n" if data.endswith(b"\n") else b""
        assert joined.encode() + ending == data.replace(b"\r\n", b"\n")


def test_a_stored_middle_page_never_inflates_what_is_before_its_seek_point(
    engine: Engine,
) -> None:
    data = _lines(20_000)
    step_id = _stored(engine, data)
    page = 27  # lines 13001..13500, well past the first seek points
    point = seek_point(compress_indexed(data, SEGMENT_BYTES)[1], (page - 1) * LINES_PER_PAGE + 1)
    assert point is not None and point.offset > len(data) // 2
    with Session(engine) as s, s.begin():
        step = s.get_one(Step, step_id)
        # Everything before the seek point becomes garbage: a read from the start fails.
        compressed = step.log_compressed
        assert compressed is not None
        step.log_compressed = b"\xff" * point.compressed + compressed[point.compressed :]
    assert _page(engine, step_id, page) == paginate(data, page)
    with Session(engine) as s, pytest.raises(zlib.error):
        zlib.decompress(s.get_one(Step, step_id).log_compressed or b"")


def test_a_streamed_middle_page_never_reads_the_chunks_before_its_line(engine: Engine) -> None:
    data = _lines(20_000)
    step_id = _streamed(engine, data)
    with Session(engine) as s, s.begin():
        # The first chunks' bytes rewritten, their counts kept: a reader walking from the
        # start sees another log, one that seeks by the counts does not.
        for seq in range(10):
            chunk = s.get_one(LogChunk, (step_id, seq))
            newlines = chunk.data.count(b"\n")
            chunk.data = b"\n" * newlines + b"g" * (len(chunk.data) - newlines)
    with Session(engine) as s:
        assert page_from(read_whole(s, step_id), 0, 27, 20_000, len(data)) != paginate(data, 27)
    assert _page(engine, step_id, 27) == paginate(data, 27)


def read_whole(session: Session, step_id: int) -> Iterator[bytes]:
    return streamed_pieces(session, step_id, streamed_size(session, step_id))


def test_the_real_store_log_indexes_every_mebibyte(engine: Engine) -> None:
    data = _lines(120_000, width=30)  # ~5 MB: a few flush points at the stored default
    with Session(engine) as s, s.begin():
        step = _step(s, "failed")
        step.store_log(data)
        step_id = step.id
        index = step.log_index
        assert index is not None and len(index) == (len(data) - 1) // SEGMENT
        assert zlib.decompress(step.log_compressed or b"") == data  # still one zlib stream
    for page in (1, 131, 132, 200):
        assert _page(engine, step_id, page) == paginate(data, page)


def test_a_log_stored_before_the_index_is_read_from_its_start(engine: Engine) -> None:
    data = _lines(3_000)
    with Session(engine) as s, s.begin():
        step = _step(s, "failed")
        step.store_log(data)
        step.log_index = None
        step_id = step.id
    assert _page(engine, step_id, 4) == paginate(data, 4)


def test_an_uncounted_log_is_not_seeked(engine: Engine) -> None:
    with Session(engine) as s, s.begin():
        step = _step(s, "failed")
        step.store_log(_lines(1_000))
        step.log_lines = None
        step_id = step.id
    with Session(engine) as s:
        assert read_page(s.get_one(Step, step_id), 501) is None
