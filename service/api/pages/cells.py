"""What one matrix cell says: a stage of one run reduced to a verdict, a text/shape label
(never colour alone) and the hover text naming the subtype. Pure: it gets plain values."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from service.domain.verdict import severity_rank
from service.models import Outcome, RunState, StepStatus

# verdict -> (glyph, short label shown in the cell, words for hover and screen readers)
VERDICTS: dict[str, tuple[str, str, str]] = {
    "pass": ("✓", "ok", "passed"),
    "upstream": ("✗", "up", "failed: upstream break"),
    "backend": ("✗", "be", "failed: backend bug"),
    "unknown": ("✗", "??", "failed: not classified"),
    "infra": ("⚠", "inf", "infrastructure problem"),
    "flake": ("≈", "flk", "flaky"),
    "running": ("◔", "run", "running"),
    "queued": ("…", "q", "queued"),
    "skipped": ("–", "skp", "all skipped"),
    "notrun": ("·", "", "not run"),
}


@dataclass(frozen=True)
class FailureFact:
    stage: str
    category: str | None  # the triaged category: the failure's verdict
    subtype: str | None
    nodeid: str | None
    line: str
    suggested: str | None = None  # what the classifier's rule suggested
    muted: bool = False  # its breakage is snoozed: shown, not red


@dataclass(frozen=True)
class RunFacts:
    """Everything the cells of one run need, already fetched."""

    run_id: int
    state: str
    verdict: str | None
    verdict_subtype: str | None
    steps: Mapping[str, str]  # step name -> status (the latest attempt)
    failures: Sequence[FailureFact]
    suite_counts: Mapping[str, Mapping[str, int]]  # suite -> outcome -> count
    suite_of: Mapping[str, str]  # failing nodeid -> suite


@dataclass(frozen=True)
class Cell:
    verdict: str
    subtype: str | None
    detail: str
    run_id: int | None
    # Every failure in it belongs to a snoozed breakage: its verdict shown, not red.
    muted: bool = False

    @property
    def glyph(self) -> str:
        return VERDICTS[self.verdict][0]

    @property
    def label(self) -> str:
        return VERDICTS[self.verdict][1]

    @property
    def title(self) -> str:
        words = VERDICTS[self.verdict][2]
        head = f"{words} ({self.subtype})" if self.subtype else words
        return f"{head}: {self.detail}" if self.detail else head

    @property
    def failed(self) -> bool:
        return self.verdict in ("upstream", "backend", "unknown")


EMPTY = Cell("notrun", None, "", None)


def _worst(failures: Iterable[FailureFact]) -> FailureFact:
    """When one cell holds failures of several categories, the worst by the one severity
    order (``service.domain.verdict.SEVERITY``, the run's verdict uses it too) wins; the
    first of equals, as for the run."""
    return min(failures, key=lambda f: severity_rank(f.category))


def _failed(run: RunFacts, failures: Sequence[FailureFact], counted: str) -> Cell:
    worst = _worst(failures)
    category = worst.category if worst.category in VERDICTS else "unknown"
    detail = f"{counted}; {worst.line[:100]}" if worst.line else counted
    if worst.suggested and worst.suggested != category:
        detail = f"{detail} (the rule suggests {worst.suggested})"
    muted = all(f.muted for f in failures)
    if muted:
        detail = f"{detail} (snoozed)"
    return Cell(category, worst.subtype, detail, run.run_id, muted)


def _pending(run: RunFacts, step: str | None) -> Cell:
    if step == "running" or (run.state == "running" and step in (None, "pending")):
        return Cell("running", None, "", run.run_id)
    if run.state == "queued":
        return Cell("queued", None, "", run.run_id)
    return Cell("notrun", None, "an earlier stage stopped the run", run.run_id)


def build_cell(run: RunFacts) -> Cell:
    """Provision and build: the torch environment and the C++ build of the backend."""
    found = [f for f in run.failures if f.stage in ("provision", "build")]
    if found:
        return _failed(run, found, f"{len(found)} failure(s)")
    statuses = [run.steps.get("provision"), run.steps.get("build")]
    if any(s in StepStatus.UNSUCCESSFUL for s in statuses):
        category = run.verdict if run.verdict in VERDICTS and run.verdict != "pass" else "unknown"
        return Cell(category, run.verdict_subtype, "the step failed", run.run_id)
    if statuses[1] == "passed":
        return Cell("pass", None, "", run.run_id)
    return _pending(run, statuses[1] if statuses[0] == "passed" else statuses[0])


def import_cell(run: RunFacts) -> Cell:
    """Importing the built backend into torch (the first thing the suite does)."""
    found = [f for f in run.failures if f.stage == "import"]
    if found:
        return _failed(run, found, "import failed")
    if run.steps.get("build") != "passed":
        return (
            _pending(run, None)
            if run.state in RunState.ACTIVE
            else Cell("notrun", None, "the build did not pass", run.run_id)
        )
    test = run.steps.get("test")
    if test in (StepStatus.PASSED, StepStatus.FAILED) or run.suite_counts:
        return Cell("pass", None, "", run.run_id)
    return _pending(run, test)


def suite_cell(run: RunFacts, suite: str) -> Cell:
    """One contract-suite file: its tests' outcomes, and the classified failures in it."""
    counts = run.suite_counts.get(suite)
    if not counts:
        return _pending(run, run.steps.get("test"))
    total = sum(counts.values())
    failed = sum(n for outcome, n in counts.items() if outcome in Outcome.FAILING)
    if failed:
        found = [f for f in run.failures if f.nodeid and run.suite_of.get(f.nodeid) == suite]
        counted = f"{failed} of {total} tests failed"
        if found:
            return _failed(run, found, counted)
        return Cell("unknown", None, counted, run.run_id)
    if counts.get(Outcome.FLAKY):
        return Cell("flake", None, f"{counts[Outcome.FLAKY]} of {total} tests flaky", run.run_id)
    if counts.get(Outcome.PASSED):
        return Cell("pass", None, f"{counts[Outcome.PASSED]} of {total} passed", run.run_id)
    return Cell("skipped", None, f"{total} skipped", run.run_id)


def stage_cells(run: RunFacts, suites: Sequence[str]) -> dict[str, Cell]:
    cells = {"build": build_cell(run), "import": import_cell(run)}
    for suite in suites:
        cells[suite] = suite_cell(run, suite)
    return cells
