"""Nightly bisection: narrowing a breakage's range to the first red nightly.

A breakage's range (last green torch -> first red torch) that spans several nightlies is
narrowed by running the backend on the nightlies in between (``nightly:DATE`` probe
runs, trigger ``bisect``), one at a time, binary search, until the good and the bad
night are adjacent on the index (or every night left between them was skipped).

Everything here is a decision from known results; the job (``workers/jobs/bisect.py``)
queues the probe this module asks for and reports back what it showed. Rules:

- a probe is **red** when the breakage's own failures show (its fingerprint or one of its
  node ids), **green** when the run got as far as the breakage's stage and they did not:
  unrelated failures do not count;
- a probe that **errored** (infrastructure, a crash of ootci) says nothing: it is tried
  once more, then the night is **skipped**, as is a run that stopped before the
  breakage's stage (an unrelated build failure hides a test breakage) and a night
  missing from the index. A skipped night is never counted as red or green: the search
  goes on with its neighbours;
- results that disagree with the order (a green night after a red one) are read
  conservatively: the bad night is the first red one, the good night the last green
  before it.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from service.domain.torch_spec import nightly_date_of

TRIGGER = "bisect"
# An errored probe is tried this many times in all before its night is skipped.
MAX_TRIES = 2


class ProbeResult(enum.StrEnum):
    PENDING = "pending"  # its run has not finished
    GREEN = "green"
    RED = "red"
    ERROR = "error"  # its run errored: tried again once
    SKIPPED = "skipped"  # says nothing: missing from the index, or errored twice, or hidden


class BisectionState(enum.StrEnum):
    RUNNING = "running"
    # Good and bad are adjacent nightlies on the index.
    NARROWED = "narrowed"
    # Skipped nights are left between good and bad: narrowed as far as the index allows.
    PARTIAL = "partial"


def spec_of(night: dt.date) -> str:
    return f"nightly:{night.isoformat()}"


def nights_of_range(base_version: str | None, head_version: str | None) -> tuple[dt.date, dt.date] | None:
    """The (good, bad) nightly dates of a range, when both ends are nightlies and at least
    one night lies strictly between them; None: nothing to bisect."""
    base = nightly_date_of(base_version or "")
    head = nightly_date_of(head_version or "")
    if base is None or head is None or (head - base).days < 2:
        return None
    return base, head


def nights_between(good: dt.date, bad: dt.date) -> list[dt.date]:
    return [good + dt.timedelta(days=n) for n in range(1, (bad - good).days)]


@dataclass(frozen=True)
class ProbeFailure:
    """One failure of a probe run, as far as matching goes."""

    fingerprint: str | None
    nodeid: str | None
    stage: str


@dataclass(frozen=True)
class Target:
    """What the breakage looks like: a probe is red when any of it shows."""

    fingerprints: frozenset[str]
    nodeids: frozenset[str]
    # The stage the breakage fails in (build, import, test): a run that stopped earlier
    # did not get to show it.
    stage: str


# The order a run goes through the stages: a failure in one hides every later one.
_STAGE_ORDER = ("provision", "build", "import", "test")


def probe_result(
    state: str, error_kind: str | None, failures: Iterable[ProbeFailure], target: Target
) -> ProbeResult:
    """What one finished (or unfinished) probe run says about the breakage."""
    if state in {"queued", "running", "waiting"}:
        return ProbeResult.PENDING
    failures = list(failures)
    if any(f.fingerprint in target.fingerprints or (f.nodeid and f.nodeid in target.nodeids)
           for f in failures):
        return ProbeResult.RED
    if state == "errored":
        return ProbeResult.ERROR
    if error_kind is not None:
        # Failed for a reason of its own (a torch that does not import): it hid the breakage.
        return ProbeResult.SKIPPED
    if state == "passed":
        return ProbeResult.GREEN
    reached = _stage_rank(target.stage)
    if any(_stage_rank(f.stage) < reached for f in failures):
        return ProbeResult.SKIPPED
    return ProbeResult.GREEN


def _stage_rank(stage: str) -> int:
    return _STAGE_ORDER.index(stage) if stage in _STAGE_ORDER else len(_STAGE_ORDER)


def night_result(attempts: Sequence[ProbeResult]) -> ProbeResult:
    """One night's result from its attempts, oldest first: a clear answer wins; errors
    are retried until MAX_TRIES, then the night is skipped."""
    for clear in (ProbeResult.RED, ProbeResult.GREEN):
        if clear in attempts:
            return clear
    if ProbeResult.PENDING in attempts:
        return ProbeResult.PENDING
    if ProbeResult.SKIPPED in attempts or attempts.count(ProbeResult.ERROR) >= MAX_TRIES:
        return ProbeResult.SKIPPED
    return ProbeResult.ERROR if attempts else ProbeResult.PENDING


@dataclass(frozen=True)
class Decision:
    good: dt.date
    bad: dt.date
    # The night to run next (a retry when it errored before); None: wait or done.
    probe: dt.date | None
    state: BisectionState
    # The nights between good and bad that could not be probed, oldest first.
    skipped: tuple[dt.date, ...] = ()

    @property
    def waiting(self) -> bool:
        return self.state is BisectionState.RUNNING and self.probe is None


def decide(
    base: dt.date,
    head: dt.date,
    tried: Mapping[dt.date, Sequence[ProbeResult]],
    available: Collection[dt.date],
) -> Decision:
    """The next probe, given what each night tried so far showed and which nights the index
    has. ``base`` is green and ``head`` red by the breakage's own runs."""
    results = {night: night_result(attempts) for night, attempts in tried.items()}
    bad = min([head, *(n for n, r in results.items() if r is ProbeResult.RED and base < n)])
    good = max([base, *(n for n, r in results.items() if r is ProbeResult.GREEN and n < bad)])
    between = nights_between(good, bad)
    if any(results.get(n) is ProbeResult.PENDING for n in between):
        return Decision(good, bad, None, BisectionState.RUNNING)
    retry = next((n for n in between if results.get(n) is ProbeResult.ERROR), None)
    if retry is not None:
        return Decision(good, bad, retry, BisectionState.RUNNING)
    skipped = tuple(n for n in between
                    if n not in available or results.get(n) is ProbeResult.SKIPPED)
    untried = [n for n in between if n not in results and n in available]
    if untried:
        # The night nearest the middle of the dates: with skipped nights about, the
        # middle of what is left would not halve the range.
        middle = good + (bad - good) / 2
        probe = min(untried, key=lambda n: (abs((n - middle).days), n))
        return Decision(good, bad, probe, BisectionState.RUNNING, skipped)
    state = BisectionState.PARTIAL if skipped else BisectionState.NARROWED
    return Decision(good, bad, None, state, skipped)
