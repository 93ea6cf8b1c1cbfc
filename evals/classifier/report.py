"""Scoring the classifier on the corpus: one result per mutant, the confusion matrix and
the accuracy. Pure data, no I/O: the CLI renders it, tests assert on it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evals.mutants.mutant import Mutant
from service.domain.verdict import Finding

MISSING = "(none)"


@dataclass(frozen=True)
class Got:
    """The decisive failure the pipeline (or the classifier on a golden log) produced."""

    stage: str
    category: str
    subtype: str
    rule: str
    line: str
    line_number: int
    captures: Mapping[str, str]
    nodeid: str | None = None

    @classmethod
    def from_finding(cls, finding: Finding, nodeid: str | None = None) -> Got:
        return cls(finding.stage.value, finding.category.value, finding.subtype.value,
                   finding.rule, finding.line, finding.line_number, dict(finding.captures),
                   nodeid)


@dataclass
class CaseResult:
    mutant: Mutant
    got: Got | None
    error: str | None = None  # why there is no verdict (no fixture, run errored, no failure)
    run_id: int | None = None
    duration_s: float = 0.0
    failures: int = 0  # failures of the run not seen on the unpatched torch
    agreeing: int = 0  # of those, how many have the expected category/subtype
    notes: list[str] = field(default_factory=list)

    @property
    def verdict_ok(self) -> bool:
        e = self.mutant.expect
        return (
            self.got is not None
            and self.got.category == e.category.value
            and self.got.subtype == e.subtype.value
        )

    @property
    def capture_problems(self) -> list[str]:
        if self.got is None:
            return ["no failure"]
        return self.mutant.expect.capture_problems(self.got.captures)

    @property
    def correct(self) -> bool:
        return self.verdict_ok and not self.capture_problems

    def to_dict(self) -> dict[str, Any]:
        e = self.mutant.expect
        return {
            "mutant": self.mutant.name,
            "pr": self.mutant.pr,
            "expected": {"stage": e.stage.value, "category": e.category.value,
                         "subtype": e.subtype.value, "captures": dict(e.captures)},
            "got": None if self.got is None else {
                "stage": self.got.stage, "category": self.got.category,
                "subtype": self.got.subtype, "rule": self.got.rule, "line": self.got.line,
                "line_number": self.got.line_number, "captures": dict(self.got.captures),
                "nodeid": self.got.nodeid,
            },
            "verdict_ok": self.verdict_ok,
            "captures_ok": not self.capture_problems,
            "capture_problems": self.capture_problems,
            "correct": self.correct,
            "error": self.error,
            "run_id": self.run_id,
            "duration_s": round(self.duration_s, 1),
            "failures": self.failures,
            "agreeing": self.agreeing,
            "notes": self.notes,
        }


def accuracy(results: Sequence[CaseResult]) -> float:
    """Share of mutants with the right category, subtype and captures (0.0 when empty)."""
    return sum(r.correct for r in results) / len(results) if results else 0.0


def confusion(results: Sequence[CaseResult]) -> dict[str, Counter[str]]:
    """expected subtype -> Counter of the subtypes the classifier answered."""
    matrix: dict[str, Counter[str]] = {}
    for r in results:
        got = r.got.subtype if r.got is not None else MISSING
        matrix.setdefault(r.mutant.expect.subtype.value, Counter())[got] += 1
    return matrix


def summary(results: Sequence[CaseResult], elapsed_s: float, mode: str) -> dict[str, Any]:
    return {
        "mode": mode,
        "mutants": len(results),
        "correct": sum(r.correct for r in results),
        "accuracy": round(accuracy(results), 4),
        "elapsed_s": round(elapsed_s, 1),
        "confusion": {k: dict(v) for k, v in confusion(results).items()},
        "results": [r.to_dict() for r in results],
    }
