"""A breakage: one fingerprint seen across nights, torch builds and machines."""

from __future__ import annotations

import datetime as dt
import enum
from typing import Any

from sqlalchemy import ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from service.models.base import Base, utcnow
from service.models.masked import MaskedJSON, MaskedString, MaskedText


class BreakageStatus(enum.StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"
    # A person's "done" (ootci breakage ID close), not a green run's; it recurring reopens it.
    CLOSED = "closed"


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
    # Triage by people (service/commands/triage_actions.py), each change in the audit log.
    # Links to bugs: [{url, by, at}].
    links: Mapped[list[Any] | None] = mapped_column(MaskedJSON, default=list)
    # Muted until a date, or until a newer torch than this version shows it (the domain's
    # triage_actions.is_snoozed); by whom and why.
    snoozed_until: Mapped[dt.datetime | None]
    snoozed_until_torch: Mapped[str | None] = mapped_column(String(100))
    snoozed_by: Mapped[str | None] = mapped_column(MaskedString(200))
    snooze_reason: Mapped[str | None] = mapped_column(MaskedText)
    # "Not this PR": [{pr, reason, by, at}]; a disputed suspect is never reported again.
    disputes: Mapped[list[Any] | None] = mapped_column(MaskedJSON, default=list)
    closed_at: Mapped[dt.datetime | None]
    closed_by: Mapped[str | None] = mapped_column(MaskedString(200))
    close_reason: Mapped[str | None] = mapped_column(MaskedText)
