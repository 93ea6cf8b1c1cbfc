"""Every webhook delivery is recorded, accepted or not, so nothing GitHub sent is lost."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Index, String
from sqlalchemy.orm import Mapped, mapped_column

from service.models.base import Base, utcnow
from service.models.masked import MaskedText


class WebhookDelivery(Base):
    __tablename__ = "webhook_deliveries"
    __table_args__ = (Index("ix_webhook_deliveries_dedupe_key", "dedupe_key", unique=True),)

    id: Mapped[int] = mapped_column(primary_key=True)
    delivery_id: Mapped[str] = mapped_column(String(100), unique=True)
    event: Mapped[str] = mapped_column(String(64))
    action: Mapped[str | None] = mapped_column(String(64))
    received_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    payload: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # queued | ignored | recorded (and why), with the runs it created.
    outcome: Mapped[str] = mapped_column(String(32), default="recorded")
    reason: Mapped[str | None] = mapped_column(MaskedText)
    run_ids: Mapped[list[Any]] = mapped_column(default=list)
    # Set on deliveries that queued runs: what they are about (service/github/dedupe.py),
    # unique, so the same event under a new delivery id queues nothing.
    dedupe_key: Mapped[str | None] = mapped_column(String(64))
