"""Index the step logs stored before logs were indexed (migration 0026) or their lines
counted (0025), so a page in their middle is read from the nearest point before it too.

An unindexed log is one zlib stream with no full-flush points, so no index can point into
it: it is inflated piece by piece and compressed again, flushed every ``SEGMENT``, with
its index (``domain/log_index.py``). A log of one segment or less keeps its bytes
(nothing in it to seek to) and only gets its (empty) index and its line count. Functions
take a session and never commit: ``ootci reindex-logs`` gives each log a transaction of
its own, so an interrupted pass loses nothing and the next goes on from there.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import ColumnElement, or_, select
from sqlalchemy.orm import Session

from service.domain.log_index import SEGMENT, IndexedCompressor
from service.models import Step


@dataclass
class ReindexReport:
    logs: int = 0  # logs that got an index or a line count
    recompressed: int = 0  # of those, logs compressed again with flush points
    log_bytes: int = 0  # their uncompressed size, together


def _unindexed() -> ColumnElement[bool]:
    return (Step.log_compressed.is_not(None)) & or_(Step.log_index.is_(None),
                                                   Step.log_lines.is_(None))


def unindexed_logs(session: Session) -> list[int]:
    """The steps whose stored log has no index or no line count, oldest first."""
    return list(session.scalars(select(Step.id).where(_unindexed()).order_by(Step.id)))


def reindex_log(session: Session, step_id: int, report: ReindexReport) -> None:
    """Index one step's stored log (and count its lines), adding it to ``report``."""
    step = session.get(Step, step_id, with_for_update=True)
    if step is None or step.log_compressed is None:
        return  # gone, or its log was removed, since the pass listed it
    if step.log_index is not None and step.log_lines is not None:
        return  # another pass did it meanwhile
    packer = IndexedCompressor()
    size = 0
    for piece in step.iter_log():  # inflated piece by piece, never whole
        packer.feed(piece)
        size += len(piece)
    compressed, index, lines = packer.finish()
    if size > SEGMENT:
        step.log_compressed = compressed
        report.recompressed += 1
    step.log_index = index
    step.log_lines = lines
    report.logs += 1
    report.log_bytes += size
