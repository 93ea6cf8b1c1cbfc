"""Subscriptions (made, removed, audited) and the events that reach them, as outbox rows.

An event becomes one message per subscription of the backend that asked for it, in the
transaction that caused it (a breakage opened, a run errored), so a receiver that is down
delays it and never loses it. The dedupe key is (subscription, event, subject): raising
the same event again for the same thing (a replayed run) sends nothing twice.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from service.commands.audit import audit
from service.commands.breakages import is_muted
from service.commands.outbox import enqueue
from service.domain.notify import (
    Channel,
    Event,
    NotifyInputError,
    check_target,
    parse_events,
    shown,
)
from service.models import Backend, Breakage, OutboxKind, OutboxMessage, Subscription, utcnow


@dataclass(frozen=True)
class NewSubscription:
    id: int
    secret: str | None  # a webhook's HMAC key: shown once


def add_subscription(
    session: Session, backend: str, events: str, channel: str, target: str, *,
    digest: bool = False, actor: str,
) -> NewSubscription:
    found = session.scalar(select(Backend).where(Backend.name == backend))
    if found is None:
        raise NotifyInputError(f"backend {backend!r} is not registered")
    try:
        kind = Channel(channel)
    except ValueError:
        raise NotifyInputError(f"unknown channel {channel!r}: webhook, email or chat") from None
    wanted = parse_events(events)
    check_target(kind, target, digest=digest)
    secret = secrets.token_urlsafe(32) if kind is Channel.WEBHOOK else None
    sub = Subscription(backend_id=found.id, events=[e.value for e in wanted], channel=kind.value,
                       target=target, secret=secret, digest=digest, created_by=actor)
    session.add(sub)
    session.flush()
    audit(session, actor, "notify.add", f"subscription:{sub.id}",
          {"backend": backend, "events": sub.events, "channel": kind.value,
           "target": shown(kind.value, target), "digest": digest})
    return NewSubscription(sub.id, secret)


def remove_subscription(session: Session, subscription_id: int, *, actor: str) -> None:
    sub = session.get(Subscription, subscription_id)
    if sub is None:
        raise NotifyInputError(f"no subscription {subscription_id}")
    session.delete(sub)
    audit(session, actor, "notify.remove", f"subscription:{subscription_id}",
          {"channel": sub.channel, "target": shown(sub.channel, sub.target)})


def next_digest(now: dt.datetime, hour: int) -> dt.datetime:
    at = now.replace(hour=hour, minute=0, second=0, microsecond=0)
    return at if at > now else at + dt.timedelta(days=1)


def notify(
    session: Session, backend_id: int, event: Event, subject: Mapping[str, Any], *,
    key: str, url: str | None = None, digest_hour: int = 7,
) -> int:
    """Queue ``event`` about ``subject`` (``key`` names it: "breakage:7") for every
    subscription of the backend that wants it; the number of messages queued."""
    subs = [s for s in session.scalars(select(Subscription)
                                       .where(Subscription.backend_id == backend_id))
            if event.value in s.events]
    if not subs:
        return 0
    backend = session.get_one(Backend, backend_id).name
    queued = 0
    for sub in subs:
        kind = OutboxKind.NOTIFY_DIGEST if sub.digest else OutboxKind.NOTIFY
        dedupe = f"notify:{sub.id}:{event.value}:{key}"
        payload = {"subscription": sub.id, "event": event.value, "backend": backend,
                   "subject": dict(subject), "url": url, "at": utcnow().isoformat()}
        # The target is the dedupe key: no two notifications supersede each other.
        if enqueue(session, kind=kind, target=dedupe, dedupe_key=dedupe, payload=payload):
            queued += 1
            if sub.digest:
                session.execute(update(OutboxMessage).where(OutboxMessage.dedupe_key == dedupe)
                                .values(due_at=next_digest(utcnow(), digest_hour)))
    return queued


def breakage_subject(b: Breakage) -> dict[str, Any]:
    return {"id": b.id, "title": b.title, "category": b.category, "subtype": b.subtype}


def notify_breakage(
    session: Session, breakage: Breakage, event: Event, subject: Mapping[str, Any], *,
    key: str, url: str | None = None, digest_hour: int = 7,
) -> int:
    """:func:`notify` about a breakage: the one gate of its notifications, where a snoozed
    one says nothing."""
    if is_muted(breakage):
        return 0
    return notify(session, breakage.backend_id, event, subject, key=key, url=url,
                  digest_hour=digest_hour)


def notify_culprit_confirmed(
    session: Session, breakage: Breakage, culprit: Mapping[str, Any], *, url: str | None = None,
) -> int:
    """The hook the culprit's verification calls when it lands: today, where a confident
    suspect is ranked. Keyed by breakage and commit, so confirming it again says nothing."""
    sha = str(culprit.get("sha") or "")
    subject = {**breakage_subject(breakage), "culprit": culprit.get("title") or sha[:12],
               "sha": sha, "pr": culprit.get("pr"), "score": culprit.get("score")}
    return notify_breakage(session, breakage, Event.CULPRIT_CONFIRMED, subject,
                           key=f"breakage:{breakage.id}:{sha}", url=url)


def vendor_status(
    session: Session, run: Any, state: str, description: str, *, upstream_repo: str,
    url: str | None = None,
) -> bool:
    """A commit status on the vendor's own commit, for a run a push to a registered
    backend's repository made (the webhook's ``repo`` and ``sha``; not upstream's pushes).
    One context per torch target; a newer state supersedes an unsent older one."""
    info = run.trigger_info or {}
    repo, sha = info.get("repo"), info.get("sha")
    if run.trigger != "webhook" or not repo or not sha or sha != run.backend_sha \
            or str(repo).lower() == upstream_repo.lower():
        return False
    context = f"ootci/{run.torch_spec}"[:100]
    return enqueue(
        session, kind=OutboxKind.VENDOR_STATUS, target=f"{repo}@{sha}:{context}"[:300],
        dedupe_key=f"vendor-status:{run.id}:{state}"[:128],
        payload={"repo": repo, "sha": sha, "state": state, "context": context,
                 "description": description[:140], "target_url": url, "run_id": run.id})
