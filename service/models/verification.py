"""A culprit verification: one suspect of a breakage, undone in an overlay of the red
torch, and what the run on it said (``service.domain.verification``)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from service.models.base import Base, utcnow


class CulpritVerification(Base):
    __tablename__ = "culprit_verifications"
    __table_args__ = (Index("ix_culprit_verifications_breakage", "breakage_id", "sha"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    breakage_id: Mapped[int] = mapped_column(ForeignKey("breakages.id"))
    # The suspect: its upstream commit and the PR it landed from.
    sha: Mapped[str] = mapped_column(String(64))
    pr: Mapped[int | None]
    # confirmed, refuted, unverifiable, error (service.domain.verification.VerifyState).
    state: Mapped[str] = mapped_column(String(16))
    # The run on the undone torch; None when none was made (unverifiable, or it broke first).
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"))
    evidence: Mapped[str] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
