"""Notifications: the events a backend's subscribers hear about, and how each is said.

Pure: what an event's message says (its JSON for a webhook, its text for chat and email),
how a webhook body is signed, which subscription input is acceptable.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import json
import re
from typing import Any


class Event(enum.StrEnum):
    NEW_BREAKAGE = "new-breakage"
    RESOLVED = "resolved"
    CULPRIT_CONFIRMED = "culprit-confirmed"
    PIN_BUMP = "pin-bump"
    RUN_ERRORED = "run-errored"


class Channel(enum.StrEnum):
    WEBHOOK = "webhook"  # HMAC-signed JSON
    EMAIL = "email"
    CHAT = "chat"  # the common incoming-webhook shape: {"text": ...}


class NotifyInputError(ValueError):
    """A subscription the user asked for cannot be made; one line for them."""


_EMAIL = re.compile(r"[^@\s<>\"']+@[^@\s<>\"']+\.[^@\s<>\"']+")
_URL = re.compile(r"https?://[^\s]+")


def parse_events(text: str) -> list[Event]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise NotifyInputError("name at least one event: " + ", ".join(e.value for e in Event))
    events = []
    for name in names:
        try:
            events.append(Event(name))
        except ValueError:
            raise NotifyInputError(f"unknown event {name!r}: one of "
                                   + ", ".join(e.value for e in Event)) from None
    return sorted(set(events), key=list(Event).index)


def check_target(channel: Channel, target: str, *, digest: bool) -> None:
    if channel is Channel.EMAIL:
        if not _EMAIL.fullmatch(target):
            raise NotifyInputError(f"{target!r} is not an email address")
    elif not _URL.fullmatch(target):
        raise NotifyInputError(f"{target!r} is not an http(s) URL")
    if digest and channel is not Channel.EMAIL:
        raise NotifyInputError("--digest daily is for --email; webhooks and chat get each event")


def shown(channel: str, target: str) -> str:
    """A receiver as lists and the audit log show it: an address whole, a URL only to its
    host, because incoming-webhook URLs (Slack's, Teams') are credentials themselves."""
    if channel == Channel.EMAIL:
        return target
    scheme, _, rest = target.partition("://")
    host = rest.split("/", 1)[0].rsplit("@", 1)[-1]
    return f"{scheme}://{host}/…" if "/" in rest.strip("/") else f"{scheme}://{host}"


def sign(secret: str, body: bytes) -> str:
    """The X-Ootci-Signature header: the body's HMAC-SHA256 under the subscription's secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def body(payload: dict[str, Any]) -> bytes:
    """One canonical encoding, so the receiver's HMAC is over the bytes that were signed."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()


def headline(payload: dict[str, Any]) -> str:
    """One line a person reads in chat, an email subject, a digest's list."""
    backend = payload.get("backend", "?")
    subject = payload.get("subject") or {}
    event = payload.get("event")
    title = subject.get("title") or ""
    if event == Event.NEW_BREAKAGE:
        return f"[{backend}] new breakage {subject.get('id')}: {title}"
    if event == Event.RESOLVED:
        return f"[{backend}] breakage {subject.get('id')} resolved: {title}"
    if event == Event.CULPRIT_CONFIRMED:
        return (f"[{backend}] culprit confirmed for breakage {subject.get('id')}: "
                f"{subject.get('culprit') or title}")
    if event == Event.PIN_BUMP:
        return f"[{backend}] pin bump proposed: {subject.get('to') or title}"
    if event == Event.RUN_ERRORED:
        return f"[{backend}] run {subject.get('id')} errored: {subject.get('error') or title}"
    return f"[{backend}] {event}: {title}"


def text(payload: dict[str, Any]) -> str:
    url = payload.get("url")
    return headline(payload) + (f"\n{url}" if url else "")


def digest_text(payloads: list[dict[str, Any]]) -> tuple[str, str]:
    """A daily digest's subject and body."""
    backends = sorted({str(p.get("backend")) for p in payloads})
    subject = f"ootci daily digest: {len(payloads)} event{'s' if len(payloads) != 1 else ''} " \
              f"({', '.join(backends)})"
    return subject, "\n\n".join(text(p) for p in payloads) + "\n"
