"""Culprit verifications of a breakage, newest first (the breakage page, the CLI)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.models import CulpritVerification


def of_breakage(session: Session, breakage_id: int) -> list[CulpritVerification]:
    return list(session.scalars(
        select(CulpritVerification)
        .where(CulpritVerification.breakage_id == breakage_id)
        .order_by(CulpritVerification.id.desc())
    ))
