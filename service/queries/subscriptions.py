"""Subscriptions as listed (never their secrets) and what their notifications became."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.domain.notify import shown
from service.models import Backend, Subscription


@dataclass(frozen=True)
class SubscriptionRow:
    id: int
    backend: str
    events: list[str]
    channel: str
    target: str  # a URL only to its host (service.domain.notify.shown)
    digest: bool
    created_by: str
    created_at: dt.datetime


def subscriptions(session: Session, backend: str | None = None) -> list[SubscriptionRow]:
    stmt = (select(Subscription, Backend.name).join(Backend, Backend.id == Subscription.backend_id)
            .order_by(Subscription.id))
    if backend:
        stmt = stmt.where(Backend.name == backend)
    return [SubscriptionRow(s.id, name, list(s.events), s.channel, shown(s.channel, s.target),
                            s.digest,
                            s.created_by, s.created_at) for s, name in session.execute(stmt)]
