"""The registered backends: what ``ootci backend list|show`` and ``GET /api/backends`` read."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.models import Backend, BackendChange, Run


def registered_backends(session: Session) -> list[Backend]:
    return list(session.scalars(select(Backend).where(Backend.nightly).order_by(Backend.name)))


def registered_backend(session: Session, name: str) -> Backend | None:
    return session.scalar(select(Backend).where(Backend.name == name, Backend.nightly))


def backend_changes(session: Session, backend_id: int) -> list[BackendChange]:
    return list(session.scalars(
        select(BackendChange).where(BackendChange.backend_id == backend_id)
        .order_by(BackendChange.changed_at, BackendChange.id)
    ))


def last_built_sha(session: Session, backend_id: int) -> str | None:
    """The backend sha of its newest run that recorded one."""
    return session.scalar(
        select(Run.backend_sha).where(Run.backend_id == backend_id, Run.backend_sha.is_not(None))
        .order_by(Run.created_at.desc(), Run.id.desc()).limit(1)
    )

