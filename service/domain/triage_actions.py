"""What a person may do to a breakage, decided without I/O: the checks of their input, and
whether a snooze still holds.

A snooze mutes a breakage until a date, or until a torch version: a run on a newer torch
that still shows it ends the snooze (the version a person accepted has moved on). While
snoozed a breakage is shown, muted, and sends no label, comment or notification. A dispute
("not this PR") takes one suspect out of the breakage's report for good; the others keep
their rank. Close is a person's "done" (distinct from resolved by a green run); a closed
breakage that shows up again is reopened, as a resolved one is: closing says it is gone,
and to silence one that is not, snooze it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from packaging.version import InvalidVersion, Version

NOTE_MAX = 4000
REASON_MAX = 1000
URL_MAX = 500


class TriageInputError(ValueError):
    """Input a person gave that no action can take: one line, said back as it is."""


def _text(value: str, what: str, limit: int, *, required: bool = True) -> str:
    text = value.strip()
    if required and not text:
        raise TriageInputError(f"{what} is empty")
    if len(text) > limit:
        raise TriageInputError(f"{what} is longer than {limit} characters")
    if "\x00" in text:
        raise TriageInputError(f"{what} contains a NUL character")
    return text


def check_note(note: str) -> str:
    """The note as stored; an empty one clears it."""
    return _text(note, "the note", NOTE_MAX, required=False)


def check_reason(reason: str, *, required: bool = True) -> str:
    return _text(reason, "the reason", REASON_MAX, required=required)


def check_link(url: str) -> str:
    """A bug's address: http(s) with a host, nothing else (it is rendered as a link)."""
    text = _text(url, "the link", URL_MAX)
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc or any(c.isspace() for c in text):
        raise TriageInputError(f"not an http(s) address: {text!r}")
    return text


def parse_until(value: str, now: dt.datetime) -> dt.datetime:
    """An ISO date (the snooze ends at its start, UTC) or date-time, strictly in the future."""
    text = value.strip()
    try:
        if len(text) == 10:
            at = dt.datetime.combine(dt.date.fromisoformat(text), dt.time(), dt.UTC)
        else:
            at = dt.datetime.fromisoformat(text)
    except ValueError:
        raise TriageInputError(f"not an ISO date: {text!r} (YYYY-MM-DD)") from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.UTC)
    if at <= now:
        raise TriageInputError(f"{text} is not in the future")
    return at.astimezone(dt.UTC)


def parse_torch_version(value: str) -> str:
    text = value.strip()
    try:
        Version(text)
    except InvalidVersion:
        raise TriageInputError(f"not a torch version: {text!r} (e.g. 2.13.0)") from None
    return text


def is_snoozed(until: dt.datetime | None, until_torch: str | None, now: dt.datetime) -> bool:
    """A date snooze holds until its date; a torch one until a newer torch ends it
    (:func:`torch_ends_snooze`, which clears it)."""
    if until_torch:
        return True
    if until is None:
        return False
    if until.tzinfo is None:  # SQLite hands datetimes back naive; they are UTC
        until = until.replace(tzinfo=dt.UTC)
    return now < until


def torch_ends_snooze(until_torch: str | None, seen_on: str | None) -> bool:
    """Whether a run on torch ``seen_on`` ends a snooze until ``until_torch``: the run's
    torch is newer (local build tags ignored: 2.14.0+cpu is 2.14.0)."""
    if not until_torch or not seen_on:
        return False
    try:
        return Version(Version(seen_on).public) > Version(Version(until_torch).public)
    except InvalidVersion:
        return False


def disputed_prs(disputes: Iterable[Mapping[str, Any]] | None) -> frozenset[int]:
    return frozenset(int(d["pr"]) for d in disputes or () if d.get("pr") is not None)


def check_dispute(pr: int, suspects: Iterable[Mapping[str, Any]],
                  disputes: Iterable[Mapping[str, Any]] | None) -> None:
    """A dispute names one of the breakage's suspects, once."""
    if pr <= 0:
        raise TriageInputError(f"not a PR number: {pr}")
    if pr not in {int(s["pr"]) for s in suspects if s.get("pr") is not None}:
        raise TriageInputError(f"PR #{pr} is not a suspect of this breakage")
    if pr in disputed_prs(disputes):
        raise TriageInputError(f"PR #{pr} is already disputed for this breakage")
