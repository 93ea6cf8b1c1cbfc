"""Culprit analysis of a regression range: the range's commits from GitHub, ranked by the
pure scorer against what the failures name. Shared by the outbox drain and `ootci culprit`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from service.domain.culprit import (
    CulpritRanking,
    FailureEvidence,
    evidence_from_finding,
    rank_culprits,
)
from service.domain.verdict import Finding
from service.github.client import GitHubClient
from service.models import Failure


def evidence_of(failures: Iterable[Failure]) -> list[FailureEvidence]:
    """What each stored failure names, as the scorer reads it (from the classifier's
    finding, stored whole on the failure)."""
    return [evidence_from_finding(Finding.from_dict(f.finding)) for f in failures if f.finding]


def rank_range(
    source: GitHubClient, failures: Iterable[Failure], base_sha: str, head_sha: str
) -> CulpritRanking:
    return rank_culprits(evidence_of(failures), source.compare(base_sha, head_sha))


def suspects_json(ranking: CulpritRanking) -> list[dict[str, Any]]:
    return [s.to_dict() for s in ranking.suspects]


def ranking_note(ranking: CulpritRanking, base_sha: str, head_sha: str) -> str | None:
    """Why there is no suspect; None when there is one."""
    if ranking.suspects:
        return None
    return (
        f"no suspect: none of the {ranking.commits_considered} commits of "
        f"{base_sha[:12]}...{head_sha[:12]} touches what the failure names"
    )
