"""Logs stored before they were indexed (migration 0026) or counted (0025) get both from
``ootci reindex-logs`` (``service/commands/log_reindex.py``): afterwards a middle page is
read from a seek point, every page is still the page a whole read gives, the stored
stream still inflates to the same log, and a pass killed half-way loses nothing."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import zlib
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.api.logs import read_page
from service.api.pages.logview import LINES_PER_PAGE, LogPage, page_from, paginate
from service.commands.log_reindex import ReindexReport, reindex_log, unindexed_logs
from service.db import session_scope
from service.domain.log_index import SEGMENT, IndexedCompressor, compress_indexed
from service.models import Step
from service.models.run import line_count
from tests.support.cli import ootci_json
from tests.support.factories import make_backend, make_run
from tests.support.paths import REPO_ROOT


def _lines(n: int, partial: bool = False) -> bytes:
    body = b"".join(b"%d:" % i + b"x" * (30 + i % 7) + b"\n" for i in range(1, n + 1))
    return body + (b"unfinished" if partial else b"")


_names = itertools.count()
BIG = _lines(90_000, partial=True)  # ~3.6 MB: three seek points at the stored default
SMALL = _lines(2_000)


def _stored_unindexed(engine: Engine, data: bytes) -> int:
    """A step as a version before 0025 stored it: one plain zlib stream, no index, no
    line count."""
    with Session(engine) as s, s.begin():
        run = make_run(s, make_backend(s, f"old{next(_names)}", "/src"), spec="installed", state="failed")
        step = Step(run_id=run.id, name="test", status="failed", log_path="/gone/test.log")
        s.add(step)
        s.flush()
        step.store_log(data)
        step.log_compressed, step.log_index, step.log_lines = zlib.compress(data), None, None
        return step.id


def _shown(view: LogPage) -> tuple[object, ...]:
    return (view.page, view.pages, view.first_line, view.lines, view.total_lines)


def _page(engine: Engine, step_id: int, page: int) -> tuple[tuple[object, ...], int]:
    """The page as the API reads it, and how many lines before it were read through."""
    with Session(engine) as s:
        step = s.get_one(Step, step_id)
        read = read_page(step, (page - 1) * LINES_PER_PAGE + 1)
        assert read is not None
        got = page_from(read.pieces, read.skip, page, read.total, read.size)
        return _shown(got), read.skip


def test_the_streaming_compressor_is_compress_indexed_fed_in_any_pieces() -> None:
    for cut in (1, 4096, 70_001, SEGMENT, SEGMENT + 3):
        packer = IndexedCompressor()
        for at in range(0, len(BIG), cut * 37 if cut < 100 else cut):
            packer.feed(BIG[at : at + (cut * 37 if cut < 100 else cut)])
        compressed, index, lines = packer.finish()
        assert (compressed, index) == compress_indexed(BIG)
        assert lines == line_count(BIG)
    assert IndexedCompressor().finish()[1:] == ([], 0)


def _pass(engine: Engine) -> ReindexReport:
    report = ReindexReport()
    with session_scope(engine) as s:
        for step_id in unindexed_logs(s):
            reindex_log(s, step_id, report)
    return report


def test_an_old_log_is_indexed_and_its_middle_pages_are_seeked(engine: Engine) -> None:
    big, small = _stored_unindexed(engine, BIG), _stored_unindexed(engine, SMALL)
    with Session(engine) as s:
        assert unindexed_logs(s) == [big, small]
        assert read_page(s.get_one(Step, big), 1) is None  # uncounted: read through
        small_bytes = s.get_one(Step, small).log_compressed

    report = _pass(engine)

    assert (report.logs, report.recompressed, report.log_bytes) == (2, 1, len(BIG) + len(SMALL))
    with Session(engine) as s:
        assert unindexed_logs(s) == []
        old = s.get_one(Step, big)
        assert old.log_lines == line_count(BIG)
        assert old.log_index is not None and len(old.log_index) == (len(BIG) - 1) // SEGMENT
        assert zlib.decompress(old.log_compressed or b"") == BIG  # still one zlib stream
        young = s.get_one(Step, small)
        assert (young.log_index, young.log_lines) == ([], line_count(SMALL))
        assert young.log_compressed == small_bytes  # nothing in it to seek to: kept as it was
    last = paginate(BIG, 1).pages
    for page in (1, 2, last // 2, last - 1, last):
        got, skip = _page(engine, big, page)
        assert got == _shown(paginate(BIG, page))
        if page > SEGMENT // 40 // LINES_PER_PAGE + 1:  # past the first flush point
            assert skip < (page - 1) * LINES_PER_PAGE  # read from a seek point, not line 1


def test_a_pass_killed_half_way_keeps_what_it_did_and_the_next_one_finishes(
    db_url: str, tmp_path: Path,
) -> None:
    from service.db import make_engine

    engine = make_engine(db_url)
    steps = [_stored_unindexed(engine, BIG) for _ in range(12)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    env.update(OOTCI_HOME=str(tmp_path / "home"), OOTCI_DATABASE_URL=db_url)
    proc = subprocess.Popen([sys.executable, "-m", "service.cli", "reindex-logs"],
                            cwd=REPO_ROOT, env=env, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    first = proc.stderr.readline()  # the first log is reported as soon as it is done
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert first.startswith("1/12 logs"), first
    with Session(engine) as s:
        left = unindexed_logs(s)
    assert 1 <= 12 - len(left) < 12  # some done, and kept; the rest left for the next
    code, doc, err = ootci_json({"OOTCI_HOME": str(tmp_path / "home"),
                                 "OOTCI_DATABASE_URL": db_url}, "reindex-logs", "--json")
    assert (code, doc["logs"]) == (0, len(left)), err
    with Session(engine) as s:
        assert unindexed_logs(s) == []
    for step_id in (steps[0], steps[-1]):
        assert _page(engine, step_id, 40)[0] == _shown(paginate(BIG, 40))
    code, doc, _ = ootci_json({"OOTCI_HOME": str(tmp_path / "home"),
                               "OOTCI_DATABASE_URL": db_url}, "reindex-logs", "--json")
    assert (code, doc) == (0, {"logs": 0, "recompressed": 0, "log_bytes": 0})
