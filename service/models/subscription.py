"""Who hears about a backend, how: a webhook (HMAC-signed JSON), an email, a chat webhook."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from service.models.base import Base, utcnow


class Subscription(Base):
    __tablename__ = "subscriptions"

    id: Mapped[int] = mapped_column(primary_key=True)
    backend_id: Mapped[int] = mapped_column(ForeignKey("backends.id", ondelete="CASCADE"))
    # service.domain.notify.Event values.
    events: Mapped[list[Any]] = mapped_column(default=list)
    channel: Mapped[str] = mapped_column(String(16))  # webhook | email | chat
    target: Mapped[str] = mapped_column(String(2000))  # a URL or an address
    # The webhook's HMAC key: the receiver checks X-Ootci-Signature with it. Shown once when
    # the subscription is made, never listed.
    secret: Mapped[str | None] = mapped_column(String(100))
    digest: Mapped[bool] = mapped_column(default=False)  # email: one message a day
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
