"""The write side of culprit verification: one row per suspect tried, and the breakage's
ranking re-ordered by what the experiments said (a confirmed suspect first)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.orm import Session

from service.commands import culprits
from service.domain.verification import Verification, apply_to_suspects
from service.models import Breakage, CulpritVerification


def record(session: Session, breakage: Breakage, verifications: Iterable[Verification],
           *, repo: str, min_score: float) -> list[CulpritVerification]:
    """Store each verification, attach it to its suspect in the breakage's ranking and
    ask for the PR report again: what it says (and whether it labels) has changed."""
    done = list(verifications)
    rows = [
        CulpritVerification(breakage_id=breakage.id, sha=v.sha, pr=v.pr, state=v.state.value,
                            run_id=v.run_id, evidence=v.evidence)
        for v in done
    ]
    session.add_all(rows)
    breakage.culprits = apply_to_suspects(breakage.culprits or [], {v.sha: v for v in done})
    session.flush()
    culprits.request_pr_report(session, breakage, repo=repo, min_score=min_score, again=True)
    return rows
