"""Commands of the weekly pin report: store this week's report per backend, owe the bump
PR to the vendor's repository (through the outbox), and remember what GitHub answered.

Takes a session and never commits: the caller owns the unit of work.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.commands import outbox
from service.domain.pin_bump import (
    BUMP,
    OpenBreakage,
    Recommendation,
    UpstreamBuild,
    render_markdown,
)
from service.models import Backend, OutboxKind, PinReport, utcnow


@dataclass(frozen=True)
class PinTarget:
    """Where a backend keeps its upstream pin (``[pins]`` in its ootci.toml)."""

    repo: str  # owner/name of the vendor's repository ("": report only, no bump PR)
    file: str  # e.g. .ci/pytorch-pin.txt, in the backend's source tree and in the repository
    base: str = "main"  # the branch the pin lives on, and the PR's base
    branch: str = "ootci/pytorch-pin-bump"  # the one branch the bump PR comes from


def week_of(day: dt.date) -> dt.date:
    """The Monday of ``day``'s ISO week: a report's key."""
    return day - dt.timedelta(days=day.weekday())


def _breakage_json(b: OpenBreakage) -> dict[str, Any]:
    return {
        "id": b.id, "title": b.title, "kind": b.kind, "since": b.since.isoformat(),
        "suspects": [dataclasses.asdict(s) for s in b.suspects],
    }


def store_report(
    session: Session,
    backend: Backend,
    week: dt.date,
    *,
    pin_text: str | None,
    pin: UpstreamBuild | None,
    green: UpstreamBuild | None,
    recommendation: Recommendation,
) -> PinReport:
    """This week's report for the backend, replaced if it was already made this week."""
    report = session.scalar(
        select(PinReport).where(PinReport.backend_id == backend.id, PinReport.week == week)
    )
    if report is None:
        report = PinReport(backend_id=backend.id, week=week, bump_pr={})
        session.add(report)
    report.generated_at = utcnow()
    report.current_pin = pin_text
    report.current_version = pin.version if pin and pin.version else None
    report.green_spec = green.spec if green else None
    report.green_version = green.version if green else None
    report.green_git_version = green.git_version if green else None
    report.green_run_id = green.run_id if green else None
    report.action = recommendation.action
    report.proposed_spec = recommendation.spec
    report.reason = recommendation.reason
    report.breakages = [_breakage_json(b) for b in recommendation.breakages]
    session.flush()
    return report


def owe_bump_pr(session: Session, report: PinReport, backend: Backend, target: PinTarget) -> bool:
    """Owe the bump PR for a ``bump`` report; True if a new message was added. The same
    proposal twice is one message; a newer one supersedes an unsent older one. On GitHub
    it is one branch and one open PR, updated in place (``GitHubClient.upsert_pull_request``)."""
    if report.action != BUMP or not report.proposed_spec:
        return False
    body = render_markdown([report.view(backend.name)], title="Bump the PyTorch pin")
    return outbox.enqueue(
        session,
        kind=OutboxKind.PIN_BUMP,
        target=f"{target.repo}:{target.branch}",
        dedupe_key=f"pin-bump:{report.id}:{report.proposed_spec}"[:128],
        payload={
            "report_id": report.id,
            "repo": target.repo,
            "base": target.base,
            "branch": target.branch,
            "path": target.file,
            "content": report.proposed_spec + "\n",
            "title": f"Bump the PyTorch pin to {report.proposed_spec}",
            "body": body,
        },
    )


def record_bump_pr(session: Session, report_id: int, answer: dict[str, Any]) -> None:
    """What GitHub answered for the report's bump PR (number and URL, or closed)."""
    report = session.get(PinReport, report_id)
    if report is not None:
        report.bump_pr = answer
