"""A breakage: one fingerprint seen across nights, torch builds and machines."""

from __future__ import annotations

import datetime as dt
import enum
from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from service.models.base import Base, utcnow


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
    title: Mapped[str] = mapped_column(Text)
    captures: Mapped[dict[str, Any]] = mapped_column(default=dict)
    status: Mapped[str] = mapped_column(String(16), default=BreakageStatus.OPEN)
    first_seen_run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"))
    last_seen_run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"))
    first_seen_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    last_seen_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    occurrences: Mapped[int] = mapped_column(default=0)
    resolved_at: Mapped[dt.datetime | None]
    resolved_by_run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"))
    # Ranked upstream commits/PRs that may have caused it: [{sha, pr, title, score, why}].
    culprits: Mapped[list[Any]] = mapped_column(default=list)
    note: Mapped[str | None] = mapped_column(Text)
