"""A running step's log, streamed to the database piece by piece as the worker writes it.

The API on another machine has no access to the worker's disk: it pages and follows a
running log through these rows. When the step ends its log is stored compressed on the
step (``Step.store_log``) and its chunks are deleted in the same transaction. A step row
is one attempt's (a new attempt deletes the old rows), so its chunks go with it.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, LargeBinary
from sqlalchemy.orm import Mapped, mapped_column

from service.models.base import Base


class LogChunk(Base):
    __tablename__ = "log_chunks"
    # The counts without the bytes (migration 0026): a running log's line count and a
    # page's seek read only this index.
    __table_args__ = (Index("ix_log_chunks_lines", "step_id", "seq", "start", "stop", "newlines"),)

    step_id: Mapped[int] = mapped_column(
        ForeignKey("steps.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    # Where the chunk lies in the log: [start, stop). A range read asks for the chunks
    # overlapping it without measuring any blob.
    start: Mapped[int] = mapped_column(BigInteger)
    stop: Mapped[int] = mapped_column(BigInteger)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    # Newlines in ``data``: a running log's line count without reading its chunks (None:
    # written before they were counted).
    newlines: Mapped[int | None] = mapped_column(Integer)
