"""A breakage's suspects as the API, the CLI and the dashboard show them."""

from __future__ import annotations

from sqlalchemy.orm import Session

from service.models import Breakage, OutboxMessage
from service.queries.outbox import messages_for
from service.schemas import Culprits, RangeOut, ReportOut, SuspectOut


def compare_url(repo: str, base: str | None, head: str | None) -> str | None:
    return f"https://github.com/{repo}/compare/{base}...{head}" if base and head else None


def report_out(message: OutboxMessage) -> ReportOut:
    out = ReportOut.model_validate(message)
    out.url = message.result.get("comment_url") if message.result else None
    return out


def breakage_culprits(session: Session, breakage: Breakage, repo: str) -> Culprits:
    return Culprits(
        range=RangeOut(
            base=breakage.range_base_sha,
            head=breakage.range_head_sha,
            base_version=breakage.range_base_version,
            head_version=breakage.range_head_version,
            base_run_id=breakage.range_base_run_id,
            note=breakage.range_note,
            compare_url=compare_url(repo, breakage.range_base_sha, breakage.range_head_sha),
        ),
        suspects=[SuspectOut.model_validate(c) for c in breakage.culprits],
        note=breakage.culprits_note,
        reports=[report_out(m) for m in messages_for(session, breakage, repo)],
    )
