"""A tail or a page of a stored step log reads only what it shows (issue #14 item 6):
measured with tracemalloc on a 72 MB log stored in a real database.

A tail within the stored tail (64 KB) reads only that column. Otherwise the log is
inflated a piece at a time up to where the answer ends: the reader holds the compressed
log (one deferred column, 7.7 MB here) and a few pieces, never the inflated log (72 MB,
which is what every read cost before)."""

from __future__ import annotations

import tracemalloc
import zlib
from collections.abc import Callable

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.api.logs import LogSlice, read_log
from service.db import session_scope
from service.models import Step, StepStatus
from tests.support.factories import make_backend, make_finished_run

LOG = b"".join(b"[%07d] compiling unit%d.cpp -O2 -fPIC\n" % (i, i) for i in range(1_600_000))
COMPRESSED = len(zlib.compress(LOG, 6))
STORED_TAIL_BUDGET = 1024 * 1024
READ_BUDGET = COMPRESSED + 4 * 1024 * 1024


def stored_step(engine: Engine, *, with_tail: bool = True) -> int:
    with session_scope(engine) as s:
        run = make_finished_run(s, make_backend(s))
        step = run.steps[0]
        step.status = StepStatus.PASSED
        step.store_log(LOG)
        if not with_tail:
            step.log_tail = None  # a row stored before the tail column existed
        return step.id


def peak_while(read: Callable[[], LogSlice]) -> tuple[LogSlice, int]:
    tracemalloc.start()
    try:
        piece = read()
        return piece, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("with_tail", [True, False], ids=["stored-tail", "inflated-tail"])
def test_a_tail_reads_a_bounded_amount(engine: Engine, with_tail: bool) -> None:
    step_id = stored_step(engine, with_tail=with_tail)
    with Session(engine) as s:
        step = s.get_one(Step, step_id)
        piece, peak = peak_while(lambda: read_log(step, offset=None, limit=None, tail=20))
    expected = b"".join(LOG.splitlines(keepends=True)[-20:])
    assert piece.data == expected
    assert piece.offset == len(LOG) - len(expected) and piece.size == len(LOG)
    budget = STORED_TAIL_BUDGET if with_tail else READ_BUDGET
    assert peak < budget, f"a 20-line tail allocated {peak} bytes"


def test_a_page_reads_a_bounded_amount(engine: Engine) -> None:
    step_id = stored_step(engine)
    with Session(engine) as s:
        step = s.get_one(Step, step_id)
        piece, peak = peak_while(
            lambda: read_log(step, offset=30_000_000, limit=65_536, tail=None)
        )
    assert piece.data == LOG[30_000_000 : 30_000_000 + 65_536]
    assert (piece.offset, piece.size) == (30_000_000, len(LOG))
    assert peak < READ_BUDGET, f"a 64 KB page allocated {peak} bytes"


def test_pages_past_the_end_and_whole_reads_still_agree(engine: Engine) -> None:
    step_id = stored_step(engine)
    with Session(engine) as s:
        step = s.get_one(Step, step_id)
        assert read_log(step, offset=len(LOG) + 5, limit=10, tail=None).data == b""
        assert read_log(step, offset=len(LOG) - 7, limit=100, tail=None).data == LOG[-7:]
        assert read_log(step, offset=None, limit=None, tail=None).data == LOG
