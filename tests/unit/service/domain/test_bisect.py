"""Nightly bisection's decisions: which night to probe next, what a probe run says, and
when the range is narrowed to one night (service/domain/bisect.py)."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest

from service.domain.bisect import (
    BisectionState,
    ProbeFailure,
    ProbeResult,
    Target,
    decide,
    night_result,
    nights_of_range,
    probe_result,
)

G, R, E, S = ProbeResult.GREEN, ProbeResult.RED, ProbeResult.ERROR, ProbeResult.SKIPPED
NIGHT1 = dt.date(2026, 11, 20)


def night(n: int) -> dt.date:
    return NIGHT1 + dt.timedelta(days=n - 1)


def every_night(first: int, last: int) -> set[dt.date]:
    return {night(n) for n in range(first, last + 1)}


def bisect(first_red: int, nights: int, available: set[dt.date] | None = None,
           errors: dict[int, int] | None = None) -> tuple[list[int], object]:
    """Drive decide() against a world where every night from ``first_red`` on is red; a
    night in ``errors`` errors that many times first. Returns the nights probed, in order."""
    available = every_night(1, nights) if available is None else available
    errors = dict(errors or {})
    tried: dict[dt.date, list[ProbeResult]] = {}
    probed: list[int] = []
    for _ in range(50):
        decision = decide(night(1), night(nights), tried, available)
        if decision.probe is None:
            return probed, decision
        n = (decision.probe - NIGHT1).days + 1
        probed.append(n)
        if errors.get(n, 0) > 0:
            errors[n] -= 1
            tried.setdefault(decision.probe, []).append(E)
        else:
            tried.setdefault(decision.probe, []).append(R if n >= first_red else G)
    raise AssertionError("no end")


@pytest.mark.parametrize("first_red", [2, 3, 4, 5])
def test_a_five_night_range_is_narrowed_to_one_night_with_at_most_two_probes(first_red: int) -> None:
    probed, decision = bisect(first_red, 5)
    assert len(probed) <= 2
    assert probed[0] == 3  # the middle night first
    assert (decision.good, decision.bad) == (night(first_red - 1), night(first_red))  # type: ignore[attr-defined]
    assert decision.state is BisectionState.NARROWED  # type: ignore[attr-defined]


@pytest.mark.parametrize(("nights", "most"), [(9, 3), (17, 4), (31, 5)])
def test_probes_grow_with_the_log_of_the_nights(nights: int, most: int) -> None:
    for first_red in range(2, nights + 1):
        probed, decision = bisect(first_red, nights)
        assert len(probed) <= most, (first_red, probed)
        assert decision.bad == night(first_red)  # type: ignore[attr-defined]


def test_a_night_missing_from_the_index_is_skipped_and_the_search_goes_on_around_it() -> None:
    available = every_night(1, 5) - {night(3)}
    probed, decision = bisect(3, 5, available)
    assert 3 not in probed and probed
    # Night 3 could not be run: the range stops at 2 (green) .. 4 (red), and says so.
    assert (decision.good, decision.bad) == (night(2), night(4))  # type: ignore[attr-defined]
    assert decision.state is BisectionState.PARTIAL  # type: ignore[attr-defined]
    assert decision.skipped == (night(3),)  # type: ignore[attr-defined]


def test_an_errored_probe_is_retried_once_then_skipped_never_counted() -> None:
    probed, decision = bisect(4, 5, errors={3: 1})
    assert probed[:2] == [3, 3]  # the retry answers
    assert decision.bad == night(4) and decision.good == night(3)  # type: ignore[attr-defined]

    probed, decision = bisect(4, 5, errors={3: 2})
    assert probed[:2] == [3, 3] and probed.count(3) == 2
    # Night 3 said nothing twice: 2 and 4 are probed instead, and 3 stays in the range.
    assert (decision.good, decision.bad) == (night(2), night(4))  # type: ignore[attr-defined]
    assert decision.skipped == (night(3),)  # type: ignore[attr-defined]


def test_a_pending_probe_makes_it_wait() -> None:
    decision = decide(night(1), night(5), {night(3): [ProbeResult.PENDING]}, every_night(1, 5))
    assert decision.waiting and decision.probe is None


def test_a_green_night_after_a_red_one_is_read_conservatively() -> None:
    # Night 2 red, night 3 green (a flake or a revert and re-land): the first red wins.
    decision = decide(night(1), night(5), {night(2): [R], night(3): [G]}, every_night(1, 5))
    assert (decision.good, decision.bad, decision.probe) == (night(1), night(2), None)


def test_nights_of_range_needs_two_nightlies_with_a_night_between() -> None:
    assert nights_of_range("2.14.0.dev20261120+cpu", "2.14.0.dev20261124+cpu") == (night(1), night(5))
    assert nights_of_range("2.14.0.dev20261120+cpu", "2.14.0.dev20261121+cpu") is None
    assert nights_of_range("2.13.0", "2.14.0.dev20261124+cpu") is None
    assert nights_of_range(None, "2.14.0.dev20261124+cpu") is None


TARGET = Target(fingerprints=frozenset({"fp-break"}), nodeids=frozenset({"tests/t.py::test_x"}),
                stage="test")


@pytest.mark.parametrize(
    ("state", "kind", "failures", "expected"),
    [
        ("running", None, [], ProbeResult.PENDING),
        ("passed", None, [], G),
        ("failed", None, [ProbeFailure("fp-break", "tests/t.py::test_x", "test")], R),
        # The same test failing, fingerprinted differently (another message): still the break.
        ("failed", None, [ProbeFailure("fp-other", "tests/t.py::test_x", "test")], R),
        # An unrelated test failure does not count: the breakage is not there.
        ("failed", None, [ProbeFailure("fp-other", "tests/t.py::test_y", "test")], G),
        # An unrelated build failure hides a test breakage: the night says nothing.
        ("failed", None, [ProbeFailure("fp-build", None, "build")], S),
        ("errored", "infra", [], E),
        ("failed", "upstream", [ProbeFailure("fp-torch", None, "provision")], S),
    ],
)
def test_probe_result_counts_only_the_breakages_own_failures(
    state: str, kind: str | None, failures: list[ProbeFailure], expected: ProbeResult
) -> None:
    assert probe_result(state, kind, failures, TARGET) is expected


def test_night_result_prefers_a_clear_answer_and_skips_after_two_errors() -> None:
    assert night_result([E, R]) is R
    assert night_result([E]) is E
    assert night_result([E, E]) is S
    assert night_result([]) is ProbeResult.PENDING
    assert all(night_result(list(p)) in (G, R) for p in itertools.permutations([E, G]))
