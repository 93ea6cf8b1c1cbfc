"""A weekly pin report: for one backend and one week, its upstream pin, the newest build
it passed on, the breakages open since, and the recommendation (bump or hold) with why."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Date, ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from service.domain.pin_bump import OpenBreakage, ReportView, Suspect, UpstreamBuild
from service.models.base import Base, utcnow
from service.models.masked import MaskedJSON, MaskedText


class PinReport(Base):
    __tablename__ = "pin_reports"
    __table_args__ = (
        UniqueConstraint("backend_id", "week"),
        Index("ix_pin_reports_week", "week"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    backend_id: Mapped[int] = mapped_column(ForeignKey("backends.id"))
    week: Mapped[dt.date] = mapped_column(Date)  # the Monday of the ISO week
    generated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    current_pin: Mapped[str | None] = mapped_column(String(1000))
    current_version: Mapped[str | None] = mapped_column(String(100))
    # The newest build the backend passed on (nightly/pin tracks), as a reproducible spec.
    green_spec: Mapped[str | None] = mapped_column(String(1000))
    green_version: Mapped[str | None] = mapped_column(String(100))
    green_git_version: Mapped[str | None] = mapped_column(String(64))
    green_run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"))
    action: Mapped[str] = mapped_column(String(8))  # bump | hold
    proposed_spec: Mapped[str | None] = mapped_column(String(1000))
    reason: Mapped[str] = mapped_column(MaskedText)
    # The open breakages since the pin: [{id, title, kind, since, suspects: [{pr, sha, score, title}]}].
    breakages: Mapped[list[Any]] = mapped_column(MaskedJSON, default=list)
    # The bump PR on the vendor's repository as last sent: {repo, number, url, created|closed}.
    bump_pr: Mapped[dict[str, Any]] = mapped_column(default=dict)

    def view(self, backend: str) -> ReportView:
        """The report as the Markdown, the page and the bump PR show it."""
        green = None
        if self.green_spec:
            green = UpstreamBuild(
                self.green_spec, self.green_version or "", self.green_git_version or "",
                self.green_run_id,
            )
        breakages = tuple(
            OpenBreakage(
                int(b["id"]), str(b["title"]), str(b["kind"]), dt.date.fromisoformat(b["since"]),
                tuple(Suspect(s.get("pr"), s.get("sha", ""), float(s.get("score", 0)),
                              s.get("title", "")) for s in b.get("suspects", [])),
            )
            for b in self.breakages or []
        )
        url = (self.bump_pr or {}).get("url")
        return ReportView(
            backend, self.week, self.current_pin, self.current_version, green, self.action,
            self.proposed_spec, self.reason, breakages, str(url) if url else None,
        )
