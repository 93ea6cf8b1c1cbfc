"""The outbox: every write ootci owes GitHub, stored before it is sent.

A row is written in the same transaction as the state that calls for it (a breakage
that got a suspect, a resolved breakage, a finished PR run), and a drain sends it later.
A GitHub outage therefore delays a report and never loses it; every kind of message is
idempotent on GitHub's side (labels are sets, the comment is found again by its marker,
a status is a value per context), so a drain that dies between the call and the commit
sends it again without duplicating anything.
"""

from __future__ import annotations

import datetime as dt
import enum
from typing import Any

from sqlalchemy import Index, String
from sqlalchemy.orm import Mapped, mapped_column

from service.models.base import Base, utcnow
from service.models.masked import MaskedJSON, MaskedText


class OutboxKind(enum.StrEnum):
    # Rank the commits of a breakage's regression range (reads the compare API).
    CULPRIT = "culprit"
    # Label the suspected PR and upsert ootci's one comment on it.
    PR_REPORT = "pr-report"
    # A commit status on a tested upstream PR's head sha.
    STATUS = "status"
    # The weekly pin bump: one branch and one open PR on the vendor's repository.
    PIN_BUMP = "pin-bump"
    # A notification to one subscription (service/notify/, never GitHub's drain).
    NOTIFY = "notify"
    # One event for a daily email digest: due at the digest hour, sent grouped.
    NOTIFY_DIGEST = "notify-digest"
    # A commit status on a vendor's own pushed commit (service/github/vendor_status.py).
    VENDOR_STATUS = "vendor-status"


class OutboxState(enum.StrEnum):
    PENDING = "pending"
    SENT = "sent"
    # No token configured: kept with what would have been posted, never sent.
    DRY_RUN = "dry-run"
    # GitHub refused for good (bad token, not found): kept for the operator, not retried.
    FAILED = "failed"
    # A newer message for the same target replaced it before it was sent.
    SUPERSEDED = "superseded"

    @classmethod
    def open_states(cls) -> frozenset[OutboxState]:
        return frozenset({cls.PENDING})


class OutboxMessage(Base):
    __tablename__ = "outbox"
    __table_args__ = (Index("ix_outbox_state_due", "state", "due_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    # What the message is about ("pytorch/pytorch#120969", "breakage:7", a sha): a newer
    # pending message for the same (kind, target) supersedes an older one.
    target: Mapped[str] = mapped_column(String(300))
    # Enqueueing the same content twice is a no-op (unique), so retries of the code that
    # enqueues are harmless.
    dedupe_key: Mapped[str] = mapped_column(String(128), unique=True)
    payload: Mapped[dict[str, Any]] = mapped_column(MaskedJSON, default=dict)
    state: Mapped[str] = mapped_column(String(16), default=OutboxState.PENDING)
    attempts: Mapped[int] = mapped_column(default=0)
    due_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    last_error: Mapped[str | None] = mapped_column(MaskedText)
    # What GitHub answered (the comment's URL, the status id), for the dashboard.
    result: Mapped[dict[str, Any]] = mapped_column(MaskedJSON, default=dict)
    breakage_id: Mapped[int | None]
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    sent_at: Mapped[dt.datetime | None]
