"""A nightly bisection of one breakage's range, and the probe runs it queued.

The breakage keeps its range columns as the range ranked now: when the bisection
narrows it, they move to the two adjacent nights, and the range the breakage opened with
stays here (``base_*``/``head_*``). A probe is an ordinary run (trigger ``bisect``);
its row links the run to the bisection and keeps what the run showed.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Date, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from service.models.base import Base, utcnow


class Bisection(Base):
    __tablename__ = "bisections"

    id: Mapped[int] = mapped_column(primary_key=True)
    # One bisection per breakage: its range is fixed when it opens.
    breakage_id: Mapped[int] = mapped_column(ForeignKey("breakages.id"), unique=True)
    backend_id: Mapped[int] = mapped_column(ForeignKey("backends.id"))
    # The red run the breakage opened on (its failures are what a probe looks for) and
    # the last green run before it on the same track.
    head_run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    base_run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    base_version: Mapped[str] = mapped_column(String(100))
    head_version: Mapped[str] = mapped_column(String(100))
    # service.domain.bisect.BisectionState
    state: Mapped[str] = mapped_column(String(16))
    # The narrowed range's ends so far: the run whose torch is the last green night and
    # the one whose torch is the first red night (the base and head runs at the start).
    good_run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    bad_run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    note: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[dt.datetime | None]

    probes: Mapped[list[BisectionProbe]] = relationship(
        back_populates="bisection", cascade="all, delete-orphan",
        order_by="BisectionProbe.id",
    )


class BisectionProbe(Base):
    __tablename__ = "bisection_probes"
    # The job looks a finished run's probe up by its run.
    __table_args__ = (Index("ix_bisection_probes_run", "run_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    bisection_id: Mapped[int] = mapped_column(ForeignKey("bisections.id", ondelete="CASCADE"))
    night: Mapped[dt.date] = mapped_column(Date)
    spec: Mapped[str] = mapped_column(String(100))
    # None: the night was never run (missing from the index).
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"))
    # service.domain.bisect.ProbeResult
    result: Mapped[str] = mapped_column(String(16))
    note: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    bisection: Mapped[Bisection] = relationship(back_populates="probes")
