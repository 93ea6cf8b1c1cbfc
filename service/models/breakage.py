"""A breakage: one fingerprint seen across nights, torch builds and machines."""

from __future__ import annotations

import datetime as dt
import enum
from typing import Any

from sqlalchemy import ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from service.models.base import Base, utcnow
from service.models.masked import MaskedJSON, MaskedText


class BreakageStatus(enum.StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"


class Breakage(Base):
    __tablename__ = "breakages"
    __table_args__ = (
        UniqueConstraint("backend_id", "fingerprint", "fingerprint_version"),
        Index("ix_breakages_status_last_seen", "status", "last_seen_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    backend_id: Mapped[int] = mapped_column(ForeignKey("backends.id"))
    fingerprint: Mapped[str] = mapped_column(String(64))
    fingerprint_version: Mapped[int]
    category: Mapped[str | None] = mapped_column(String(16))
    subtype: Mapped[str | None] = mapped_column(String(32))
    title: Mapped[str] = mapped_column(MaskedText)
    captures: Mapped[dict[str, Any]] = mapped_column(MaskedJSON, default=dict)
    status: Mapped[str] = mapped_column(String(16), default=BreakageStatus.OPEN)
    first_seen_run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"))
    last_seen_run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"))
    first_seen_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    last_seen_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    occurrences: Mapped[int] = mapped_column(default=0)
    resolved_at: Mapped[dt.datetime | None]
    resolved_by_run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"))
    # The regression range, fixed when the breakage opens: the torch of the newest passed
    # run of the same backend on the same track before it (base) and of the first red (head).
    # No base (no earlier green on the track) leaves the shas empty and says why in range_note.
    range_base_run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"))
    range_base_sha: Mapped[str | None] = mapped_column(String(64))
    range_head_sha: Mapped[str | None] = mapped_column(String(64))
    range_base_version: Mapped[str | None] = mapped_column(String(100))
    range_head_version: Mapped[str | None] = mapped_column(String(100))
    range_note: Mapped[str | None] = mapped_column(MaskedText)
    # Ranked upstream commits that may have caused it: [{sha, pr, title, score, reasons}],
    # best first; empty with culprits_note saying why (not analysed yet, no suspect, ...).
    culprits: Mapped[list[Any]] = mapped_column(MaskedJSON, default=list)
    culprits_note: Mapped[str | None] = mapped_column(MaskedText)
    culprits_ranked_at: Mapped[dt.datetime | None]
    note: Mapped[str | None] = mapped_column(MaskedText)
