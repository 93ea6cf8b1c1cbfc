"""The log stream: what the sink writes reaches log_chunks in order, masked and within the
cap, in a few rows rather than one per line; a step row that is gone stops it quietly."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, delete, func, select
from sqlalchemy.orm import Session

from service.commands.log_chunks import drop_log_chunks
from service.commands.runs import create_run, get_or_create_backend
from service.db import session_scope
from service.models import LogChunk, Step, StepStatus
from service.queries.log_chunks import streamed_range, streamed_size
from workers.pipeline.logs.masking import SecretMasker
from workers.pipeline.logs.sink import LogSink
from workers.pipeline.logs.stream import LogStream


def running_step(engine: Engine) -> int:
    with session_scope(engine) as s:
        run = create_run(s, get_or_create_backend(s, "b", "/srv/b"), "installed", trigger="api")
        s.flush()
        step = Step(run_id=run.id, name="build", status=StepStatus.RUNNING)
        s.add(step)
        s.flush()
        return step.id


def test_the_stream_is_the_files_head_masked_and_capped(engine: Engine, tmp_path: Path) -> None:
    step_id = running_step(engine)
    stream = LogStream(engine, step_id, every_s=5.0, batch_bytes=4096)
    sink = LogSink(tmp_path / "build.log", masker=SecretMasker(["hunter22"]),
                   max_bytes=64 * 1024, on_bytes=stream.append)
    for i in range(5000):  # ~130 KB: twice the cap
        sink.write(f"line {i} password=hunter22")
    head = (tmp_path / "build.log").read_bytes()  # before close: the head only
    stream.close()
    sink.close()
    with Session(engine) as s:
        assert streamed_size(s, step_id) == len(head) <= 32 * 1024
        assert streamed_range(s, step_id, 0, len(head)) == head
        assert streamed_range(s, step_id, 100, 150) == head[100:150]
        sizes = list(s.scalars(select(LogChunk.stop - LogChunk.start)
                               .where(LogChunk.step_id == step_id).order_by(LogChunk.seq)))
        # Batched: a row per 4 KB gathered, only the last one (the close) smaller.
        assert sizes and all(size >= 4096 for size in sizes[:-1]), sizes
        drop_log_chunks(s, step_id)
        s.commit()
        assert streamed_size(s, step_id) == 0
    assert b"hunter22" not in head and b"password=***" in head
    assert b"log capped" in (tmp_path / "build.log").read_bytes()  # the tail came at close


def test_a_replaced_step_stops_the_stream_without_an_error(engine: Engine) -> None:
    step_id = running_step(engine)
    stream = LogStream(engine, step_id, every_s=0.05)
    stream.append(b"first line\n")
    stream.close()
    assert stream.sent_bytes == len(b"first line\n")
    with session_scope(engine) as s:  # a newer attempt starts over: the old rows go
        s.execute(delete(Step).where(Step.id == step_id))
    later = LogStream(engine, step_id, every_s=0.05)
    later.append(b"written by the worker that lost its lease\n")
    later.close()
    assert later.sent_bytes == 0
    with Session(engine) as s:
        assert s.scalar(select(func.count()).select_from(LogChunk)) == 0
