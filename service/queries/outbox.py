"""What ootci told (or would tell) GitHub about a breakage, for its page and the API."""

from __future__ import annotations

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from service.models import Breakage, OutboxKind, OutboxMessage


def messages_for(session: Session, breakage: Breakage, repo: str) -> list[OutboxMessage]:
    """The breakage's own messages (its analysis) and the reports on the PRs its
    suspects name, newest first."""
    prs = {f"{repo}#{c['pr']}" for c in breakage.culprits[:1] if c.get("pr") is not None}
    return list(
        session.scalars(
            select(OutboxMessage)
            .where(
                or_(
                    OutboxMessage.breakage_id == breakage.id,
                    (OutboxMessage.kind == OutboxKind.PR_REPORT) & OutboxMessage.target.in_(prs),
                )
            )
            .order_by(OutboxMessage.id.desc())
            .limit(50)
        )
    )
