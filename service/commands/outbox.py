"""The write side of the outbox (see ``service.models.outbox``): enqueue, claim, settle.

Callers pass their session and commit; nothing here commits.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from service.commands.upsert import insert_or_ignore
from service.models import OutboxKind, OutboxMessage, OutboxState, utcnow

# After a transient failure: 1, 2, 4, ... minutes, at most an hour apart.
_BACKOFF_BASE_S = 60
_BACKOFF_MAX_S = 3600


def enqueue(
    session: Session,
    *,
    kind: str,
    target: str,
    dedupe_key: str,
    payload: dict[str, Any] | None = None,
    breakage_id: int | None = None,
) -> bool:
    """Add a message unless one with the same dedupe key exists; True if it was added.

    A newly added message supersedes the older pending ones of the same kind and target:
    they would only send an older state of the same thing."""
    now = utcnow()
    added = insert_or_ignore(
        session,
        OutboxMessage,
        {
            "kind": kind,
            "target": target,
            "dedupe_key": dedupe_key,
            "payload": payload or {},
            "state": OutboxState.PENDING,
            "attempts": 0,
            "due_at": now,
            "result": {},
            "breakage_id": breakage_id,
            "created_at": now,
        },
        conflict_on=["dedupe_key"],
    )
    if added is None:
        return False
    session.execute(
        update(OutboxMessage)
        .where(
            OutboxMessage.kind == kind,
            OutboxMessage.target == target,
            OutboxMessage.state == OutboxState.PENDING,
            OutboxMessage.id != added,
        )
        .values(state=OutboxState.SUPERSEDED)
    )
    return True


# Notifications and vendor statuses share the table and its retries but have drains of
# their own (service/notify/, service/github/vendor_status.py): the report drain
# (reporter.py), which asks for due messages without naming kinds, never sees them.
NOTIFY_KINDS = frozenset({OutboxKind.NOTIFY, OutboxKind.NOTIFY_DIGEST})
OWN_DRAIN_KINDS = NOTIFY_KINDS | {OutboxKind.VENDOR_STATUS}


def due(
    session: Session, *, now: dt.datetime | None = None, limit: int = 50,
    kinds: frozenset[str] | None = None,
) -> list[OutboxMessage]:
    """Pending messages whose time has come, oldest first, locked against other drains
    on Postgres (a second drain skips them instead of sending them twice). ``kinds``:
    only those; by default every kind but ``OWN_DRAIN_KINDS``."""
    query = (
        select(OutboxMessage)
        .where(OutboxMessage.state == OutboxState.PENDING, OutboxMessage.due_at <= (now or utcnow()),
               OutboxMessage.kind.in_(kinds) if kinds is not None
               else OutboxMessage.kind.not_in(OWN_DRAIN_KINDS))
        .order_by(OutboxMessage.id)
        .limit(limit)
    )
    if session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)
    return list(session.scalars(query))


def mark_sent(message: OutboxMessage, result: dict[str, Any]) -> None:
    message.state = OutboxState.SENT
    message.result = result
    message.last_error = None
    message.attempts += 1
    message.sent_at = utcnow()


def mark_dry_run(message: OutboxMessage, result: dict[str, Any]) -> None:
    """No token: keep what would have been posted where the dashboard shows it."""
    message.state = OutboxState.DRY_RUN
    message.result = result
    message.sent_at = utcnow()


def mark_retry(message: OutboxMessage, error: str, *, wait_s: float | None = None) -> None:
    """A transient failure: try again later (GitHub's own wait wins over the backoff)."""
    message.attempts += 1
    backoff = min(_BACKOFF_BASE_S * 2 ** (message.attempts - 1), _BACKOFF_MAX_S)
    message.due_at = utcnow() + dt.timedelta(seconds=max(wait_s or 0, backoff))
    message.last_error = error


def mark_failed(message: OutboxMessage, error: str) -> None:
    """Refused for good (the token, a missing PR): kept for the operator, not retried."""
    message.attempts += 1
    message.state = OutboxState.FAILED
    message.last_error = error
