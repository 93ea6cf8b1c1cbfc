"""What people do to a breakage: a note, a link to a bug, a snooze, a dispute of a suspect
("not this PR"), close and reopen. Each is one write and one audit entry (who, what, why)
in the caller's transaction; the checks come first, so bad input writes nothing. The rules
are the domain's (``service.domain.triage_actions``); the caller commits.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy.orm import Session

from service.commands import culprits
from service.commands.audit import audit
from service.commands.breakages import reopened
from service.domain.triage_actions import (
    TriageInputError,
    check_dispute,
    check_link,
    check_note,
    check_reason,
    parse_torch_version,
    parse_until,
)
from service.models import Breakage, BreakageStatus, utcnow


class UnknownBreakage(LookupError):
    def __init__(self, breakage_id: int) -> None:
        super().__init__(f"breakage {breakage_id} does not exist")


__all__ = ["TriageInputError", "UnknownBreakage", "add_link", "close", "dispute", "reopen",
           "set_note", "snooze"]


def _breakage(session: Session, breakage_id: int) -> Breakage:
    found = session.get(Breakage, breakage_id, with_for_update=True)
    if found is None:
        raise UnknownBreakage(breakage_id)
    return found


def _record(session: Session, b: Breakage, actor: str, action: str, detail: dict[str, Any]) -> None:
    audit(session, actor, f"breakage.{action}", f"breakage:{b.id}", detail)


def set_note(session: Session, breakage_id: int, note: str, *, actor: str) -> Breakage:
    text = check_note(note)
    b = _breakage(session, breakage_id)
    before, b.note = b.note, text or None
    _record(session, b, actor, "note", {"note": b.note, "was": before})
    return b


def add_link(session: Session, breakage_id: int, url: str, *, actor: str) -> Breakage:
    link = check_link(url)
    b = _breakage(session, breakage_id)
    if any(existing.get("url") == link for existing in b.links or []):
        raise TriageInputError(f"breakage {b.id} already links {link}")
    b.links = [*(b.links or []), {"url": link, "by": actor, "at": utcnow().isoformat()}]
    _record(session, b, actor, "link", {"url": link})
    return b


def snooze(
    session: Session, breakage_id: int, *, until: str | None = None, torch: str | None = None,
    reason: str = "", actor: str, now: dt.datetime | None = None,
) -> Breakage:
    """Mute until a date (ISO, in the future) or until a torch version: exactly one."""
    if bool(until) == bool(torch):
        raise TriageInputError("snooze until a date or until a torch version: give one of them")
    why = check_reason(reason, required=False)
    at = parse_until(until, now or utcnow()) if until else None
    version = parse_torch_version(torch) if torch else None
    b = _breakage(session, breakage_id)
    b.snoozed_until, b.snoozed_until_torch = at, version
    b.snoozed_by, b.snooze_reason = actor, why or None
    _record(session, b, actor, "snooze", {"until": at.isoformat() if at else None,
                                          "torch": version, "reason": why})
    return b


def dispute(
    session: Session, breakage_id: int, pr: int, reason: str, *, actor: str, repo: str,
    min_score: float,
) -> Breakage:
    """"Not this PR": the suspect is passed over for this breakage (its report and label
    go to no one, or to the next suspect), and the PR's comment is re-rendered through the
    outbox, saying who disputed it and why; the label comes off there."""
    why = check_reason(reason)
    b = _breakage(session, breakage_id)
    check_dispute(pr, b.culprits or [], b.disputes)
    b.disputes = [*(b.disputes or []),
                  {"pr": pr, "reason": why, "by": actor, "at": utcnow().isoformat()}]
    _record(session, b, actor, "dispute", {"pr": pr, "reason": why})
    culprits.request_pr_report(session, b, repo=repo, min_score=min_score, pr=pr)
    # The next suspect, if one is confident enough, is reported in its place.
    culprits.request_pr_report(session, b, repo=repo, min_score=min_score)
    return b


def close(session: Session, breakage_id: int, reason: str = "", *, actor: str) -> Breakage:
    b = _breakage(session, breakage_id)
    if b.status == BreakageStatus.CLOSED:
        raise TriageInputError(f"breakage {b.id} is already closed")
    why = check_reason(reason, required=False)
    b.status = BreakageStatus.CLOSED
    b.closed_at, b.closed_by, b.close_reason = utcnow(), actor, why or None
    _record(session, b, actor, "close", {"reason": why, "was": "resolved"
                                         if b.resolved_at else "open"})
    return b


def reopen(session: Session, breakage_id: int, reason: str = "", *, actor: str) -> Breakage:
    b = _breakage(session, breakage_id)
    if b.status == BreakageStatus.OPEN:
        raise TriageInputError(f"breakage {b.id} is open already")
    why = check_reason(reason, required=False)
    was = b.status
    reopened(b)
    _record(session, b, actor, "reopen", {"reason": why, "was": was})
    return b
