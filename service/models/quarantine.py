"""Quarantined tests: still run and recorded, but unable to fail a run or open a breakage."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from service.models.base import Base, utcnow


class Quarantine(Base):
    __tablename__ = "quarantines"
    __table_args__ = (UniqueConstraint("backend_id", "nodeid"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    backend_id: Mapped[int] = mapped_column(ForeignKey("backends.id", ondelete="CASCADE"))
    nodeid: Mapped[str] = mapped_column(String(1000))
    # "manual" (a person, named in ``by``) or "auto" (the flakiness rate passed the threshold).
    reason: Mapped[str] = mapped_column(String(16))
    by: Mapped[str] = mapped_column(String(200))
    rate: Mapped[float | None]
    since: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # Runs in a row where the test passed since it was quarantined; at the release setting
    # (OOTCI_FLAKY_RELEASE_AFTER) the row is deleted.
    clean_runs: Mapped[int] = mapped_column(default=0)
