"""When a test is flaky, and how flaky: the rules behind ``/flaky`` and quarantine.

A test is *flaky* on a backend when, over the backend's last N runs, it

- passed on the automatic rerun (outcome ``flaky``) at least once, or
- both passed and failed on the same *family*: the same torch build and the same backend
  commit. Nothing changed between those runs but the dice.

Only the same family counts because a regression also "passes then fails" across runs:
it flips once, when torch or the backend changed; quarantining it would hide the very
breakage ootci exists to report. Automatic quarantine asks more (:func:`should_quarantine`):
two failures, and a pass after one with nothing changed. Its *rate* is the share of the runs that saw the test
in which it did not pass (failed, errored, crashed, or passed only on rerun).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from service.domain.states import Outcome

NOT_PASSED = frozenset({*Outcome.FAILING, Outcome.FLAKY})


@dataclass(frozen=True)
class Observation:
    run_id: int
    family: Hashable  # (torch build, backend sha): what the test ran against
    outcome: str


@dataclass(frozen=True)
class FlakeStat:
    runs: int  # runs in the window that recorded the test (skips not counted)
    not_passed: int
    flaky: bool
    reason: str
    # It failed and later passed again with nothing changed (or passed on rerun): what
    # automatic quarantine asks for, since a break that came with no change of torch or
    # backend (a dependency that moved) fails every run after and never recovers.
    recovered: bool = False

    @property
    def rate(self) -> float:
        return self.not_passed / self.runs if self.runs else 0.0


def assess(observations: Iterable[Observation]) -> FlakeStat:
    seen = [o for o in observations if o.outcome != Outcome.SKIPPED]
    not_passed = sum(1 for o in seen if o.outcome in NOT_PASSED)
    reruns = sum(1 for o in seen if o.outcome == Outcome.FLAKY)
    by_family: dict[Hashable, set[bool]] = defaultdict(set)
    failed_in: set[Hashable] = set()
    recovered = reruns > 0
    for o in sorted(seen, key=lambda o: o.run_id):
        if o.outcome == Outcome.PASSED or o.outcome in Outcome.FAILING:
            passed = o.outcome == Outcome.PASSED
            by_family[o.family].add(passed)
            if not passed:
                failed_in.add(o.family)
            elif o.family in failed_in:
                recovered = True
    mixed = sum(1 for outcomes in by_family.values() if len(outcomes) == 2)
    reasons = []
    if reruns:
        reasons.append(f"passed on rerun {reruns}x")
    if mixed:
        reasons.append("passed and failed on the same torch and backend commit")
    return FlakeStat(len(seen), not_passed, bool(reasons), "; ".join(reasons), recovered)


# One failure is an incident; automatic quarantine waits for the second.
MIN_FAILURES = 2


def should_quarantine(stat: FlakeStat, threshold: float) -> bool:
    """Automatic quarantine: a flaky test that failed at least twice and recovered in
    between, at or above the rate. A threshold of 1 never quarantines anything."""
    return (threshold < 1 and stat.flaky and stat.recovered
            and stat.not_passed >= MIN_FAILURES and stat.rate >= threshold)


def is_clean(outcome: str) -> bool:
    """A run that counts towards leaving quarantine: the test passed outright."""
    return outcome == Outcome.PASSED
