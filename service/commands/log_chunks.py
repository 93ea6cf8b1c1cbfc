"""Writing a running step's streamed log (``LogChunk``) and dropping it once stored."""

from __future__ import annotations

from sqlalchemy import delete
from sqlalchemy.orm import Session

from service.models import LogChunk


def append_log_chunk(session: Session, step_id: int, seq: int, start: int, data: bytes) -> None:
    """Chunk ``seq`` of the step's log: ``data`` at byte ``start``. A step that no longer
    exists (a newer attempt replaced it) fails the flush with an IntegrityError."""
    session.add(LogChunk(step_id=step_id, seq=seq, start=start, stop=start + len(data), data=data,
                         newlines=data.count(b"\n")))
    session.flush()


def drop_log_chunks(session: Session, step_id: int) -> None:
    """The step's log is stored whole: its streamed chunks are no longer read."""
    session.execute(delete(LogChunk).where(LogChunk.step_id == step_id))
