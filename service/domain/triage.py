"""Triage: who is to blame for a failure, and for a whole run. Pure; the caller looks up
the history (last green run, rerun result) and passes it in as ``TriageEvidence``.

``triage(finding, evidence) -> TriageVerdict`` walks this cascade, first answer wins:

1. no finding                         -> unknown  (a red step with no evidence at all)
2. the finding is an infra signature  -> infra    (disk, network, pip, timeout, killed)
2b. torch itself does not import in a fresh env (``torch-unusable``, found at provision,
   where no backend code has run) -> upstream, whatever the history: nothing else is there
3. same fingerprint failed on the last green run of this backend on the pinned torch
                                      -> backend  (pre-existing: the new torch did not do it)
4. it passed on the automatic rerun   -> flake
5. there is a last green torch for this backend (the failure is new since then):
     backend unchanged since then     -> upstream (only torch changed)
     backend changed, rule blames it  -> backend
     backend changed otherwise        -> unknown  (both moved: needs a bisect)
6. no green run to compare with       -> unknown  (the rule's guess is in the reason)

Infra is checked before "pre-existing" on purpose (a deviation from the issue's order): a
full disk or an OOM kill that also hit the last green run says the machine is broken, and
blaming the backend for it would be wrong.

``run_verdict(verdicts) -> TriageVerdict | None``: the worst failure decides the run, in
the order upstream > backend > infra > flake > unknown. Upstream ranks first because it is
what the service exists to report; unknown ranks last because a run with one named break
and one unexplained failure is still that break's run. None for a run without failures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from service.domain.verdict import Category, Finding, Stage, Subtype, TriageVerdict

SEVERITY: tuple[Category, ...] = (
    Category.UPSTREAM,
    Category.BACKEND,
    Category.INFRA,
    Category.FLAKE,
    Category.UNKNOWN,
)


@dataclass(frozen=True)
class TriageEvidence:
    """What the history says about one failure (the caller queries it)."""

    # The same fingerprint also failed on the last green run of this backend + torch pin.
    failed_on_last_green: bool = False
    # The failing test/step passed when rerun automatically.
    passed_on_rerun: bool = False
    # This backend has a green run on an earlier torch, so "new since then" is meaningful.
    has_last_green_torch: bool = False
    # The backend's sha differs from the one in that last green run.
    backend_changed: bool = False


def _describe(finding: Finding) -> str:
    captures = ", ".join(f"{k}={v}" for k, v in sorted(finding.captures.items()))
    named = f" ({captures})" if captures else ""
    return f"{finding.subtype.value} by rule {finding.rule}{named}"


def triage(finding: Finding | None, evidence: TriageEvidence) -> TriageVerdict:
    if finding is None:
        return TriageVerdict(Category.UNKNOWN, Subtype.GENERIC,
                             "the step failed but no rule matched its log")
    what = _describe(finding)
    if finding.category is Category.INFRA:
        return TriageVerdict(Category.INFRA, finding.subtype, f"infrastructure failure: {what}")
    if finding.subtype is Subtype.TORCH_UNUSABLE and finding.stage is Stage.PROVISION:
        return TriageVerdict(
            Category.UPSTREAM, finding.subtype,
            f"torch itself does not import in a fresh environment, before any backend code: "
            f"{what}",
        )
    if evidence.failed_on_last_green:
        return TriageVerdict(
            Category.BACKEND, finding.subtype,
            f"pre-existing: the same failure is on the last green run of this backend and "
            f"torch pin: {what}",
        )
    if evidence.passed_on_rerun:
        return TriageVerdict(Category.FLAKE, finding.subtype, f"passed on rerun: {what}")
    if evidence.has_last_green_torch:
        if not evidence.backend_changed:
            return TriageVerdict(
                Category.UPSTREAM, finding.subtype,
                f"new since the last green torch with the same backend: {what}",
            )
        if finding.category is Category.BACKEND:
            return TriageVerdict(
                Category.BACKEND, finding.subtype,
                f"new since the last green run, the backend changed and the rule blames it: "
                f"{what}",
            )
        return TriageVerdict(
            Category.UNKNOWN, finding.subtype,
            f"new since the last green run, but torch and the backend both changed: {what}",
        )
    return TriageVerdict(
        Category.UNKNOWN, finding.subtype,
        f"no green run of this backend to compare with; the rule suggests "
        f"{finding.category.value}: {what}",
    )


def run_verdict(verdicts: Iterable[TriageVerdict]) -> TriageVerdict | None:
    items = list(verdicts)
    if not items:
        return None
    worst = min(items, key=lambda v: SEVERITY.index(v.category))
    counts = Counter(v.category for v in items)
    tally = ", ".join(f"{counts[c]} {c.value}" for c in SEVERITY if counts[c])
    noun = "failure" if len(items) == 1 else "failures"
    return TriageVerdict(
        worst.category, worst.subtype, f"{len(items)} {noun} ({tally}); worst: {worst.reason}"
    )
