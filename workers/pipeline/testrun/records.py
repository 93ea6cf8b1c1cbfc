"""What a test run records: one record per test, and the step's outcome with them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from service.domain.states import Outcome
from workers.pipeline.steps.outcome import StepOutcome


@dataclass(frozen=True)
class TestRecord:
    __test__ = False  # not a pytest class

    nodeid: str
    outcome: Outcome
    duration_s: float | None = None
    message: str | None = None
    details: str | None = None

    @property
    def suite(self) -> str:
        """The contract-suite file a test belongs to (tests/test_memory.py -> test_memory)."""
        path = self.nodeid.split("::", 1)[0]
        return Path(path).stem


@dataclass(frozen=True)
class TestRunOutcome:
    __test__ = False

    step: StepOutcome
    results: tuple[TestRecord, ...]
    # Why the suite could not be run to the end (the step is then errored), else None.
    problem: str | None = None
