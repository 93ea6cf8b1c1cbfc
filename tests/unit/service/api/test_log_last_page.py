"""The last page of a step log, where a running log's view opens and "last" links point,
is read from the log's end (issue #33): the stored tail with the stored line count, or
the last streamed chunks with their newline counts. It must be the very page reading the
whole log gives, and must not touch the rest of the log."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.api.logs import read_last_page
from service.api.pages.logview import LAST_PAGE, LINES_PER_PAGE, last_page, paginate
from service.commands.log_chunks import append_log_chunk
from service.models import LogChunk, Step
from tests.support.factories import make_backend, make_run


def _lines(n: int, width: int = 10, partial: bool = False) -> bytes:
    body = b"".join(b"%d:" % i + b"x" * width + b"\n" for i in range(1, n + 1))
    return body + (b"unfinished" if partial else b"")


LOGS = {
    "empty": b"",
    "one-unfinished-line": b"no newline yet",
    "one-page-exactly": _lines(LINES_PER_PAGE),
    "a-page-and-one": _lines(LINES_PER_PAGE + 1),
    "cr-and-blank-lines": b"a\r\n\n\nprogress 10%\rprogress 90%\r\n" * 400,
    "long-with-partial-line": _lines(5_321, partial=True),
    "wide-lines": _lines(1_700, width=3_000),  # the last page is ~1.5 MB: past 64 KB
}


def _step(session: Session, status: str) -> Step:
    run = make_run(session, make_backend(session, "logs", "/src"), spec="installed",
                   state="running" if status == "running" else "failed")
    step = Step(run_id=run.id, name="build", status=status, log_path="/elsewhere/build.log")
    session.add(step)
    session.flush()
    return step


@pytest.mark.parametrize("name", LOGS)
def test_the_stored_last_page_is_the_whole_reads_last_page_without_the_log(
    engine: Engine, name: str,
) -> None:
    data = LOGS[name]
    with Session(engine) as s, s.begin():
        step = _step(s, "failed")
        step.store_log(data)
        # Anything read from the compressed log now breaks: the page must come from the end.
        step.log_compressed = b"not zlib"
        step_id = step.id
    with Session(engine) as s:
        read = read_last_page(s.get_one(Step, step_id), LINES_PER_PAGE)
    assert read is not None
    tail, total = read
    assert last_page(tail.data, total, tail.size) == paginate(data, LAST_PAGE)


@pytest.mark.parametrize("name", LOGS)
def test_the_streamed_last_page_reads_only_the_last_chunks(engine: Engine, name: str) -> None:
    data = LOGS[name]
    size = 4096
    with Session(engine) as s, s.begin():
        step = _step(s, "running")
        for seq, start in enumerate(range(0, len(data), size)):
            append_log_chunk(s, step.id, seq, start, data[start : start + size])
        step_id = step.id
        # Empty the first chunk's bytes, keeping its count: a reader that walks from the
        # start sees a different log, one that reads from the end does not.
        first = s.get(LogChunk, (step_id, 0))
        if first is not None and len(data) > 3 * LINES_PER_PAGE * 12:
            first.data = b"\n" * len(first.data)
    with Session(engine) as s:
        read = read_last_page(s.get_one(Step, step_id), LINES_PER_PAGE)
    assert read is not None
    tail, total = read
    assert last_page(tail.data, total, tail.size) == paginate(data, LAST_PAGE)


def test_a_log_counted_before_counts_were_stored_is_read_through(engine: Engine) -> None:
    with Session(engine) as s, s.begin():
        step = _step(s, "failed")
        step.store_log(_lines(1_000))
        step.log_lines = None
        step_id = step.id
    with Session(engine) as s:
        assert read_last_page(s.get_one(Step, step_id), LINES_PER_PAGE) is None
