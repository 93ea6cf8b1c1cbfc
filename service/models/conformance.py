"""A run's conformance results: for each mechanism of the conformance suite (conformance/),
how many of its tests passed, failed and were skipped against the backend's device, and
which failed."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from service.models.base import Base
from service.models.masked import MaskedJSON


class ConformanceResult(Base):
    __tablename__ = "conformance_results"
    __table_args__ = (
        UniqueConstraint("run_id", "mechanism"),
        # Per-mechanism history across runs.
        Index("ix_conformance_results_mechanism", "mechanism"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    device: Mapped[str] = mapped_column(String(64))  # the device type the suite tested
    mechanism: Mapped[str] = mapped_column(String(32))
    level: Mapped[str] = mapped_column(String(16))  # required | recommended | optional
    passed: Mapped[int] = mapped_column(Integer, default=0)
    failed: Mapped[int] = mapped_column(Integer, default=0)
    skipped: Mapped[int] = mapped_column(Integer, default=0)
    # The node ids of its failing tests, in suite order.
    failing: Mapped[list[Any]] = mapped_column(MaskedJSON, default=list)
