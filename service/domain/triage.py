"""Triage: who is to blame for a failure, and for a whole run. Pure; the caller looks up
the history and passes it in as ``TriageEvidence``.

A failure is blamed on what changed. Its history is that of the *same* test (by node id)
or step, not of the whole run: a backend with one long-standing red test still has a
history for every other test. ``TriageEvidence`` holds

- ``this``: the identity of the run being triaged: its torch (``TorchIdentity``: version,
  ``git_version`` and the wheel's sha256) and its backend (``Run.backend_sha``: a git sha,
  ``<sha>-dirty-<hash>`` with local edits, ``nogit-<content hash>`` for a directory);
- ``passed``: the newest earlier run of the backend where this test or step passed;
- ``broke``: the first run after ``passed`` where it failed, when that is earlier than this
  run (it has failed since); None when it broke in this run;
- ``failed_before``: earlier runs where the same fingerprint failed, one per distinct
  (torch, backend) pair, newest first;
- ``passed_on_rerun``: the test passed when rerun automatically;
- ``isolation``: what the isolating run found (``IsolationResult``), when the pipeline ran
  one for this failure: this run's backend built, and the failing test run, on a reference
  torch (the torch of ``passed``'s run, or a pin when it never passed).

Two torches are the same when version and git_version agree and their wheels' sha256 do
not differ (an unknown sha256 does not count as a difference); two backends when their
recorded shas are equal (an unknown one is never the same).

``triage(finding, evidence) -> TriageVerdict`` walks this cascade, first answer wins:

1. an infra signature                  -> infra     (disk, network, pip, timeout, killed)
2. torch itself does not import in a fresh env (``torch-unusable``, found at provision,
   where no backend code has run)      -> upstream, whatever the history
3. it passed on the automatic rerun    -> flake
4. it passed on an earlier run (``passed``):
   a. it failed since on the very torch and backend it passed on (``broke``, an earlier
      run with the same failure, or this run)
                                       -> flake   (nothing changed: nondeterministic)
   b. this run against ``passed``: only torch changed -> upstream;
                                   only the backend changed -> backend
   c. both changed: where it first failed (``broke``), then the earlier runs with the
      same failure since ``passed``, oldest first, the first that differs from ``passed``
      in one thing only decides: only torch -> upstream, only the backend -> backend
      (pre-existing: the new torch did not do it). So a break keeps its blame on the
      nights it persists, whatever moves meanwhile, and an earlier run that already
      isolated it (a pin run of tonight's backend) settles it.
   d. otherwise                        -> unknown, needs isolation: this backend on
                                          ``passed``'s torch would decide
5. it never passed in this backend's history:
     the same failure is on an earlier run (newest first, one on this run's torch preferred)
                                       -> backend (pre-existing: it never passed)
     otherwise (a vendor's first night, a new test that fails)
                                       -> unknown, needs isolation (no torch to isolate on)

6. where 4d or 5 would answer unknown and ``isolation`` is given, the isolating run decides:
     it passes (builds) on the reference torch   -> upstream (only torch's change breaks it)
     it fails there with the same fingerprint    -> backend  (it breaks without torch's change)
     it fails there differently, or neither failure has a fingerprint
                                                 -> unknown, saying so (isolation ran)
     the isolating run could not run for it      -> unknown, needs isolation, saying why
                                                    (no other torch, the backend does not
                                                    build on the reference either, ...)

A failure with no rule matched (no finding) goes through the same history from step 3 on,
as the generic subtype: a step that passed on the old torch and fails on the new one is
upstream's break whether or not a rule names it.

"Pre-existing" is an earlier run with the same failure that isolates it, not any earlier
red run: the same failure on an earlier run with *this* run's torch would not clear the
torch (that run may have broken on it too), so while the failure has a pass to compare
with, only a run that differs from that pass in the backend alone blames the backend.
Infra is checked first on purpose: a full disk that also hit an earlier run says the
machine is broken, and blaming the backend for it would be wrong.

Reasons name the runs compared and what differed, e.g. "passed on run #12 (torch 2.13.0
abc1234, backend 9f8e7d6); only torch changed: 2.13.0 abc1234 → 2.15.0 def5678", or
"isolated: backend 9f8e7d6 built and ran tests/test_x.py::test_y against torch 2.13.0
(abc1234, the torch of run #12 where it passed): it passes there, so only torch's change
breaks it". The
rule's own category is never the verdict (except for infra and a torch that does not
import); the reason ends with what the rule suggests.

``run_verdict(verdicts) -> TriageVerdict | None``: the worst failure decides the run, in
the order of ``SEVERITY`` (``service.domain.verdict``: upstream > backend > unknown >
infra > flake), with a tally of the rest. None for a run without failures.

``judge_run(verdicts, passed=...) -> RunVerdict``: the run's verdict as every view shows
it: ``compatible`` for a run that passed (nothing failed but tests that passed on rerun),
else ``run_verdict``. A failure triaged flake because nothing changed since it passed
(step 4) still fails its run: it did fail, and a rerun did not clear it.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from service.domain.verdict import (
    COMPATIBLE,
    SEVERITY,
    Category,
    Finding,
    Stage,
    Subtype,
    TriageVerdict,
)

__all__ = [
    "COMPATIBLE",
    "SEVERITY",
    "Isolated",
    "IsolationResult",
    "RunIdentity",
    "RunVerdict",
    "TorchIdentity",
    "TriageEvidence",
    "judge_run",
    "run_verdict",
    "triage",
]


@dataclass(frozen=True)
class TorchIdentity:
    """The torch a run tested: what it was built from and the wheel that was installed."""

    version: str
    git_version: str
    sha256: str | None = None

    def same_as(self, other: TorchIdentity) -> bool:
        if (self.version, self.git_version) != (other.version, other.git_version):
            return False
        return not (self.sha256 and other.sha256 and self.sha256 != other.sha256)

    @property
    def label(self) -> str:
        return f"{self.version} {self.git_version[:7]}" if self.git_version else self.version


def _short_backend(sha: str | None) -> str:
    if not sha:
        return "unknown"
    if sha.startswith("nogit-"):
        return sha[:13]
    return sha if "-dirty-" in sha else sha[:7]


@dataclass(frozen=True)
class RunIdentity:
    """What one run built and tested: its torch and its backend (None: not recorded)."""

    run_id: int
    torch: TorchIdentity | None
    backend: str | None

    @property
    def label(self) -> str:
        torch = self.torch.label if self.torch else "unknown"
        return f"run #{self.run_id} (torch {torch}, backend {_short_backend(self.backend)})"

    def same_torch(self, other: RunIdentity) -> bool:
        return self.torch is not None and other.torch is not None and self.torch.same_as(
            other.torch)

    def same_backend(self, other: RunIdentity) -> bool:
        return self.backend is not None and self.backend == other.backend


class Isolated(enum.StrEnum):
    """What a failure did in the isolating run, on the reference torch."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_RUN = "not-run"


@dataclass(frozen=True)
class IsolationResult:
    """The isolating run's answer for one failure: this run's backend (``backend``) built,
    and the failing test run, on the reference torch (``torch``; ``reference`` says whose
    torch it is: "the torch of run #12 where it passed", "pin 'installed'").

    ``nodeid``: the test repeated; None for the build. ``outcome``: passed, failed (its
    ``fingerprint`` and decisive ``line`` there) or not run (``why``: the experiment could
    not be carried out for this failure)."""

    outcome: Isolated
    nodeid: str | None = None
    backend: str | None = None
    torch: TorchIdentity | None = None
    reference: str = ""
    fingerprint: str | None = None
    line: str = ""
    why: str = ""

    @classmethod
    def not_run(cls, why: str, nodeid: str | None = None) -> IsolationResult:
        return cls(Isolated.NOT_RUN, nodeid=nodeid, why=why)

    def to_dict(self) -> dict[str, object]:
        """As stored on the failure (``failures.isolation``)."""
        torch = self.torch
        return {
            "outcome": self.outcome.value, "nodeid": self.nodeid, "backend": self.backend,
            "torch": None if torch is None else {
                "version": torch.version, "git_version": torch.git_version,
                "sha256": torch.sha256},
            "reference": self.reference, "fingerprint": self.fingerprint,
            "line": self.line, "why": self.why,
        }

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any]) -> IsolationResult:
        torch = stored.get("torch")
        return cls(
            Isolated(stored["outcome"]), nodeid=stored.get("nodeid"),
            backend=stored.get("backend"),
            torch=None if not torch else TorchIdentity(
                torch["version"], torch["git_version"], torch.get("sha256")),
            reference=stored.get("reference", ""), fingerprint=stored.get("fingerprint"),
            line=stored.get("line", ""), why=stored.get("why", ""),
        )


@dataclass(frozen=True)
class TriageEvidence:
    """What the history says about one failure (the caller queries it; see the module
    docstring for each field)."""

    this: RunIdentity | None = None
    passed: RunIdentity | None = None
    broke: RunIdentity | None = None
    failed_before: Sequence[RunIdentity] = ()
    passed_on_rerun: bool = False
    isolation: IsolationResult | None = None


def _describe(finding: Finding) -> str:
    captures = ", ".join(f"{k}={v}" for k, v in sorted(finding.captures.items()))
    named = f" ({captures})" if captures else ""
    return f"{finding.subtype.value} by rule {finding.rule}{named}"


def _suggests(finding: Finding | None) -> str:
    if finding is None:
        return "no rule matched its log"
    return f"the rule suggests {finding.category.value}: {_describe(finding)}"


def _torch_change(before: TorchIdentity | None, after: TorchIdentity | None) -> str:
    if before is None or after is None:
        return f"{before.label if before else 'unknown'} → {after.label if after else 'unknown'}"
    if before.label == after.label and before.sha256 and after.sha256:
        return (f"{before.label} rebuilt: wheel sha256 {before.sha256[:7]} → "
                f"{after.sha256[:7]}")
    return f"{before.label} → {after.label}"


def _backend_change(before: str | None, after: str | None) -> str:
    return f"{_short_backend(before)} → {_short_backend(after)}"


def _history(passed: RunIdentity, broke: RunIdentity | None) -> str:
    where = f"passed on {passed.label}"
    return f"{where}; first failed on {broke.label}" if broke is not None else where


def triage(finding: Finding | None, evidence: TriageEvidence) -> TriageVerdict:
    subtype = finding.subtype if finding is not None else Subtype.GENERIC
    if finding is not None and finding.category is Category.INFRA:
        return TriageVerdict(Category.INFRA, subtype,
                             f"infrastructure failure: {_describe(finding)}")
    if (finding is not None and finding.subtype is Subtype.TORCH_UNUSABLE
            and finding.stage is Stage.PROVISION):
        return TriageVerdict(
            Category.UPSTREAM, subtype,
            f"torch itself does not import in a fresh environment, before any backend code: "
            f"{_describe(finding)}",
        )
    suggests = _suggests(finding)
    if evidence.passed_on_rerun:
        return TriageVerdict(Category.FLAKE, subtype, f"passed on rerun; {suggests}")
    this = evidence.this
    if this is None:  # nothing to compare with (a caller without history)
        verdict = TriageVerdict(Category.UNKNOWN, subtype,
                                f"no history to compare with; {suggests}", needs_isolation=True)
    elif evidence.passed is not None:
        verdict = _since_it_passed(evidence.passed, this, evidence, subtype, suggests)
    else:
        verdict = _never_passed(this, evidence, subtype, suggests)
    if verdict.needs_isolation and evidence.isolation is not None:
        return _isolated(verdict, finding, evidence.isolation, subtype, suggests)
    return verdict


def _one_change(passed: RunIdentity, failed: RunIdentity) -> Category | None:
    """Upstream when only torch differs between the two runs, backend when only the
    backend does; None when both (or neither) do."""
    torch_changed = not passed.same_torch(failed)
    backend_changed = not passed.same_backend(failed)
    if torch_changed == backend_changed:
        return None
    return Category.UPSTREAM if torch_changed else Category.BACKEND


def _what_changed(passed: RunIdentity, failed: RunIdentity) -> str:
    torch = _torch_change(passed.torch, failed.torch)
    backend = _backend_change(passed.backend, failed.backend)
    if _one_change(passed, failed) is Category.UPSTREAM:
        return f"only torch changed: {torch}"
    if _one_change(passed, failed) is Category.BACKEND:
        return f"only the backend changed: {backend}"
    return f"both changed: torch {torch}, backend {backend}"


def _since_it_passed(
    passed: RunIdentity, this: RunIdentity, evidence: TriageEvidence, subtype: Subtype,
    suggests: str,
) -> TriageVerdict:
    """Step 4 of the cascade, in this order: a failure since ``passed`` on the very same
    torch and backend makes it nondeterministic; else this run against ``passed``; else
    (both changed) where it first failed, then the earlier runs with the same failure
    since ``passed``, oldest first, each when it differs from ``passed`` in one thing
    only; else it needs isolation."""
    broke = evidence.broke
    since = sorted((e for e in evidence.failed_before if e.run_id > passed.run_id),
                   key=lambda e: e.run_id)
    where = f"passed on {passed.label}"
    for failed in ([broke] if broke else []) + since + [this]:
        if failed.same_torch(passed) and failed.same_backend(passed):
            return TriageVerdict(
                Category.FLAKE, subtype,
                f"{where}; it failed on run #{failed.run_id} with the same torch and same "
                f"backend as run #{passed.run_id} where it passed: nondeterministic; "
                f"{suggests}",
            )
    blamed = _one_change(passed, this)
    if blamed is not None:
        return TriageVerdict(blamed, subtype,
                             f"{where}; {_what_changed(passed, this)}; {suggests}")
    if broke is not None and (blamed := _one_change(passed, broke)) is not None:
        return TriageVerdict(
            blamed, subtype,
            f"{_history(passed, broke)}; {_what_changed(passed, broke)}; failing since "
            f"(this run: {_what_changed(passed, this)}); {suggests}",
        )
    for earlier in since:
        blamed = _one_change(passed, earlier)
        if blamed is None:
            continue
        pre = "pre-existing: " if blamed is Category.BACKEND else ""
        return TriageVerdict(
            blamed, subtype,
            f"{where}; {pre}the same failure is on {earlier.label}, where "
            f"{_what_changed(passed, earlier)} (this run: {_what_changed(passed, this)}); "
            f"{suggests}",
        )
    return TriageVerdict(
        Category.UNKNOWN, subtype,
        f"{_history(passed, broke)}; {_what_changed(passed, this)}; needs isolation: a run "
        f"of this backend on torch {passed.torch.label if passed.torch else 'unknown'} "
        f"(run #{passed.run_id}'s) would decide; {suggests}",
        needs_isolation=True, isolate_against_run_id=passed.run_id,
    )


def _never_passed(
    this: RunIdentity, evidence: TriageEvidence, subtype: Subtype, suggests: str
) -> TriageVerdict:
    if evidence.failed_before:
        on_this_torch = [e for e in evidence.failed_before if e.same_torch(this)]
        earlier = (on_this_torch or list(evidence.failed_before))[0]
        which = ("on this same torch: it is not new with this torch" if on_this_torch
                 else "on an earlier torch: the new torch did not do it")
        return TriageVerdict(
            Category.BACKEND, subtype,
            f"pre-existing: the same failure is on {earlier.label}, {which}; it never passed "
            f"in this backend's history; {suggests}",
        )
    return TriageVerdict(
        Category.UNKNOWN, subtype,
        f"no earlier run of this backend where it passed (a first night, or it never "
        f"passed) and no earlier run with the same failure; needs isolation: a run of "
        f"backend {_short_backend(this.backend)} on an earlier torch would decide; {suggests}",
        needs_isolation=True,
    )


def _reference_label(result: IsolationResult) -> str:
    torch = result.torch
    if torch is None:
        return f"torch unknown ({result.reference})"
    git = f"{torch.git_version[:7]}, " if torch.git_version else ""
    return f"torch {torch.version} ({git}{result.reference})"


def _isolated(
    history: TriageVerdict, finding: Finding | None, result: IsolationResult, subtype: Subtype,
    suggests: str,
) -> TriageVerdict:
    """Step 6: the isolating run's answer replaces the history's unknown."""
    against = history.isolate_against_run_id
    if result.outcome is Isolated.NOT_RUN:
        return replace(history, reason=f"not isolated: {result.why}; {history.reason}")
    did = f"built and ran {result.nodeid}" if result.nodeid else "built"
    what = (f"isolated: backend {_short_backend(result.backend)} {did} against "
            f"{_reference_label(result)}")
    if result.outcome is Isolated.PASSED:
        there = "it passes there" if result.nodeid else "it builds there"
        return TriageVerdict(Category.UPSTREAM, subtype,
                             f"{what}: {there}, so only torch's change breaks it; {suggests}",
                             isolate_against_run_id=against)
    ours = finding.fingerprint if finding is not None else ""
    if ours and result.fingerprint == ours:
        return TriageVerdict(
            Category.BACKEND, subtype,
            f"{what}: it fails there too ({result.line}; the same fingerprint), so the backend "
            f"breaks it, not torch's change; {suggests}",
            isolate_against_run_id=against)
    if not ours and not result.fingerprint:
        differs = (f"it fails there too ({result.line}), and no rule names either failure, "
                   "so whether it is the same failure cannot be told")
    else:
        differs = f"it fails there differently ({result.line})"
    return TriageVerdict(
        Category.UNKNOWN, subtype,
        f"{what}: {differs}; the isolation does not tell torch's change from the backend's; "
        f"{suggests}",
        isolate_against_run_id=against)


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


@dataclass(frozen=True)
class RunVerdict:
    """A run's verdict as stored on the run and shown everywhere: a Category value, or
    ``compatible`` for a run that passed."""

    verdict: str
    subtype: str | None
    reason: str


def judge_run(verdicts: Iterable[TriageVerdict], *, passed: bool) -> RunVerdict:
    """``compatible`` for a run that passed (its only failures passed on rerun: a flaky
    test does not speak for the run); otherwise the worst failure's category, with the
    tally of all of them."""
    items = list(verdicts)
    if passed:
        if not items:
            return RunVerdict(COMPATIBLE, None, "passed")
        noun = "test" if len(items) == 1 else "tests"
        return RunVerdict(COMPATIBLE, None, f"passed; {len(items)} flaky {noun} passed on rerun")
    worst = run_verdict(items)
    if worst is None:
        return RunVerdict(Category.UNKNOWN.value, None, "failed without a classified failure")
    return RunVerdict(worst.category.value, worst.subtype.value, worst.reason)
