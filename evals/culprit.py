"""The culprit corpus: recorded-shape regression ranges with a known culprit, and how well
culprit ranking finds it (``python -m evals culprit`` prints ``CorpusReport.render()``).

Each case (evals/data/culprit/*.json, written by make_cases.py there) holds a compare
response and the per-commit responses in GitHub's REST shape, the failure evidence as the
classifier captured it, and the expected culprit. A case whose expected sha is null expects
"no suspect".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.paths import CULPRIT_CASES
from service.domain.culprit import (
    Confidence,
    CulpritRanking,
    FailureEvidence,
    StackFrame,
    evidence_from_finding,
    rank_culprits,
)
from service.domain.upstream import FileChange, UpstreamCommit, pr_number_from_message
from service.domain.verdict import Finding

DEFAULT_CORPUS = CULPRIT_CASES


@dataclass(frozen=True)
class CorpusCase:
    name: str
    expected_sha: str | None
    expected_pr: int | None
    evidence: tuple[FailureEvidence, ...]
    commits: tuple[UpstreamCommit, ...]


@dataclass(frozen=True)
class CaseResult:
    case: CorpusCase
    ranking: CulpritRanking
    # 1-based rank of the expected culprit among the suspects; None when not listed. For a
    # "no suspect" case, 1 when the answer is no suspect.
    rank: int | None

    @property
    def top_score(self) -> float:
        return self.ranking.suspects[0].score if self.ranking.suspects else 0.0


@dataclass(frozen=True)
class CorpusReport:
    results: tuple[CaseResult, ...]

    def _share(self, within: int) -> float:
        hits = sum(1 for r in self.results if r.rank is not None and r.rank <= within)
        return hits / len(self.results) if self.results else 0.0

    @property
    def top1(self) -> float:
        return self._share(1)

    @property
    def top3(self) -> float:
        return self._share(3)

    @property
    def misses(self) -> tuple[CaseResult, ...]:
        return tuple(r for r in self.results if r.rank != 1)

    def render(self) -> str:
        lines = [f"{'case':36} {'expected':>10} {'rank':>5} {'top score':>9}  confidence"]
        for r in self.results:
            expected = f"#{r.case.expected_pr}" if r.case.expected_pr else "none"
            rank = "-" if r.rank is None else str(r.rank)
            lines.append(f"{r.case.name:36} {expected:>10} {rank:>5} {r.top_score:9.2f}  "
                         f"{r.ranking.confidence.value}")
        lines.append(f"top-1 {self.top1:.0%}  top-3 {self.top3:.0%}  "
                     f"({len(self.results)} cases)")
        for r in self.misses:
            top = r.ranking.top
            lines.append(f"miss: {r.case.name}: expected "
                         f"{r.case.expected_sha[:12] if r.case.expected_sha else 'no suspect'}, "
                         f"got {top.sha[:12] + ' ' + top.title if top else 'no suspect'}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------- GitHub JSON
# A minimal converter for the corpus. The GitHub adapter (service/github/) owns the real one;
# this should be replaced by it once it exists.


def _file_change(entry: Mapping[str, Any]) -> FileChange:
    return FileChange(
        filename=str(entry["filename"]),
        status=str(entry["status"]),
        previous_filename=entry.get("previous_filename"),
        patch=entry.get("patch"),
        additions=int(entry.get("additions", 0)),
        deletions=int(entry.get("deletions", 0)),
    )


def commit_from_github(data: Mapping[str, Any]) -> UpstreamCommit:
    """An ``UpstreamCommit`` from a ``GET /repos/{o}/{r}/commits/{sha}`` response."""
    message = str(data["commit"]["message"])
    author = data.get("author") or {}
    return UpstreamCommit(
        sha=str(data["sha"]),
        message=message,
        files=tuple(_file_change(f) for f in data.get("files", ())),
        pr=pr_number_from_message(message),
        author=author.get("login") if isinstance(author, Mapping) else None,
        committed_at=data["commit"].get("committer", {}).get("date"),
    )


def _evidence(entry: Mapping[str, Any]) -> FailureEvidence:
    finding = Finding.from_dict(entry["finding"])
    evidence = evidence_from_finding(finding)
    frames = tuple(StackFrame(str(f["path"]), str(f["function"]))
                   for f in entry.get("frames", ()))
    return FailureEvidence(
        category=evidence.category, subtype=evidence.subtype, captures=evidence.captures,
        line=evidence.line, stage=evidence.stage, context=evidence.context,
        frames=frames or evidence.frames,
    )


def load_case(path: Path) -> CorpusCase:
    data = json.loads(path.read_text())
    by_sha: Mapping[str, Any] = data["commits"]
    # The compare response gives the order (oldest first); the commit responses the files.
    commits = tuple(commit_from_github(by_sha[c["sha"]]) for c in data["compare"]["commits"])
    expected = data["expected"]
    return CorpusCase(
        name=str(data["case"]),
        expected_sha=expected.get("sha"),
        expected_pr=expected.get("pr"),
        evidence=tuple(_evidence(e) for e in data["evidence"]),
        commits=commits,
    )


def load_corpus(directory: Path = DEFAULT_CORPUS) -> tuple[CorpusCase, ...]:
    return tuple(load_case(p) for p in sorted(directory.glob("*.json")))


def _rank_of(case: CorpusCase, ranking: CulpritRanking) -> int | None:
    if case.expected_sha is None:
        return 1 if ranking.confidence is Confidence.NO_SUSPECT else None
    for i, suspect in enumerate(ranking.suspects, start=1):
        if suspect.sha == case.expected_sha:
            return i
    return None


def evaluate(cases: Sequence[CorpusCase]) -> CorpusReport:
    results = []
    for case in cases:
        ranking = rank_culprits(case.evidence, case.commits)
        results.append(CaseResult(case, ranking, _rank_of(case, ranking)))
    return CorpusReport(tuple(results))


def run_corpus(directory: Path = DEFAULT_CORPUS) -> CorpusReport:
    """What ``python -m evals culprit`` prints: top-1 / top-3 accuracy and the misses."""
    return evaluate(load_corpus(directory))
