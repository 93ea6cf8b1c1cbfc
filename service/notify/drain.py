"""Send the notifications the outbox holds: each message committed as sent (or retried, or
failed) on its own, like GitHub's drain (``service/github/reporter.py``), whose backoff and
row locks it shares through ``service/commands/outbox.py``.

A daily digest is every due ``notify-digest`` message of one subscription, sent as one
email and settled together.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.commands import outbox
from service.config import Settings
from service.domain.notify import Channel, body, digest_text, headline, text
from service.models import OutboxKind, OutboxMessage, OutboxState, Subscription, utcnow
from service.notify import channels

log = logging.getLogger(__name__)
KINDS = frozenset({OutboxKind.NOTIFY, OutboxKind.NOTIFY_DIGEST})


@dataclass
class NotifyResult:
    sent: int = 0
    retried: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


def _deliver(settings: Settings, sub: Subscription, messages: list[OutboxMessage]) -> dict[str, Any]:
    payloads = [m.payload for m in messages]
    channel = Channel(sub.channel)
    if channel is Channel.WEBHOOK:
        (m,) = messages
        return channels.webhook(sub.target, sub.secret or "", body(m.payload),
                                event=str(m.payload.get("event")), delivery=str(m.id))
    if channel is Channel.CHAT:
        return channels.chat(sub.target, text(payloads[0]))
    smtp_url = settings.smtp_url.get_secret_value()
    if len(payloads) == 1 and not sub.digest:
        return channels.email(smtp_url, settings.smtp_from, sub.target, headline(payloads[0]),
                              text(payloads[0]) + "\n")
    subject, content = digest_text(payloads)
    return channels.email(smtp_url, settings.smtp_from, sub.target, subject, content)


def _batch(session: Session, first: OutboxMessage, now: dt.datetime) -> list[OutboxMessage]:
    if first.kind != OutboxKind.NOTIFY_DIGEST:
        return [first]
    more = session.scalars(
        select(OutboxMessage).where(OutboxMessage.kind == OutboxKind.NOTIFY_DIGEST,
                                    OutboxMessage.state == OutboxState.PENDING,
                                    OutboxMessage.due_at <= now, OutboxMessage.id != first.id)
        .order_by(OutboxMessage.id))
    sub_id = first.payload.get("subscription")
    return [first, *(m for m in more if m.payload.get("subscription") == sub_id)]


def drain(
    sessions: Callable[[], Session], settings: Settings, *, limit: int = 200,
    now: dt.datetime | None = None,
) -> NotifyResult:
    """Send the due notifications, oldest first. ``now``: the time to judge "due" by (a
    test looks past a backoff instead of sleeping through it)."""
    result = NotifyResult()
    at = now or utcnow()
    for _ in range(limit):
        with sessions() as session:
            found = outbox.due(session, limit=1, kinds=KINDS, now=at)
            if not found:
                break
            batch = _batch(session, found[0], at)
            sub = session.get(Subscription, found[0].payload.get("subscription"))
            try:
                if sub is None:
                    raise channels.Refused("the subscription was removed")
                answer = _deliver(settings, sub, batch)
            except channels.Retry as exc:
                for m in batch:
                    outbox.mark_retry(m, str(exc))
                result.retried += len(batch)
                result.errors.append(str(exc))
            except channels.Refused as exc:
                for m in batch:
                    outbox.mark_failed(m, str(exc))
                result.failed += len(batch)
                result.errors.append(str(exc))
            else:
                for m in batch:
                    outbox.mark_sent(m, answer)
                result.sent += len(batch)
            session.commit()
    if result.errors:
        log.warning("notifications: %d retried, %d failed: %s", result.retried, result.failed,
                    result.errors[-1])
    return result
