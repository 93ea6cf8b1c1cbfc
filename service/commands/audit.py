"""The audit log's one write: every command that changes something calls :func:`audit` in
its own transaction, so a write and its record commit (or roll back) together."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from service.models import AuditEntry


def audit(
    session: Session, actor: str, action: str, target: str, detail: dict[str, Any] | None = None
) -> AuditEntry:
    entry = AuditEntry(actor=actor[:200], action=action[:64], target=target[:300],
                       detail=detail or {})
    session.add(entry)
    return entry
