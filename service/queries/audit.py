"""The audit log, newest first, and the named tokens (never their hashes)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.models import ApiToken, AuditEntry


@dataclass(frozen=True)
class AuditRow:
    id: int
    at: dt.datetime
    actor: str
    action: str
    target: str
    detail: dict[str, Any]


def audit_log(
    session: Session, *, limit: int = 100, actor: str | None = None, before: int | None = None
) -> list[AuditRow]:
    stmt = select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit)
    if actor:
        stmt = stmt.where(AuditEntry.actor == actor)
    if before is not None:
        stmt = stmt.where(AuditEntry.id < before)
    return [AuditRow(e.id, e.at, e.actor, e.action, e.target, dict(e.detail or {}))
            for e in session.scalars(stmt)]


@dataclass(frozen=True)
class TokenRow:
    name: str
    role: str
    created_by: str
    created_at: dt.datetime
    revoked_at: dt.datetime | None


def tokens(session: Session) -> list[TokenRow]:
    return [TokenRow(t.name, t.role, t.created_by, t.created_at, t.revoked_at)
            for t in session.scalars(select(ApiToken).order_by(ApiToken.name))]


def live_token(session: Session, digest: str) -> ApiToken | None:
    """The unrevoked token whose sha256 is ``digest`` (an indexed lookup)."""
    return session.scalar(select(ApiToken).where(ApiToken.token_sha256 == digest,
                                                 ApiToken.revoked_at.is_(None)))
