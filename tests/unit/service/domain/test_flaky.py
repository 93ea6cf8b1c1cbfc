from service.domain.flaky import FlakeStat, Observation, assess, is_clean, should_quarantine

SAME = ("torch-1", "sha-a")


def test_two_failures_in_ten_runs_on_one_family_is_flaky_at_20_percent() -> None:
    stat = assess([Observation(i, SAME, "failed" if i in (3, 7) else "passed")
                   for i in range(10)])
    assert stat.flaky and stat.runs == 10 and stat.not_passed == 2
    assert stat.rate == 0.2
    assert should_quarantine(stat, 0.1)


def test_a_regression_flips_once_across_families_and_is_not_flaky() -> None:
    history = [Observation(i, ("torch-1", "sha-a"), "passed") for i in range(8)]
    history += [Observation(8 + i, ("torch-2", "sha-a"), "failed") for i in range(2)]
    stat = assess(history)
    assert not stat.flaky
    assert not should_quarantine(stat, 0.1)


def test_a_break_with_nothing_changed_that_never_recovers_is_listed_but_not_quarantined() -> None:
    # A dependency moved under the same torch and backend commit: it fails from then on.
    history = [Observation(i, SAME, "passed" if i < 6 else "failed") for i in range(10)]
    stat = assess(history)
    assert stat.flaky and not stat.recovered
    assert not should_quarantine(stat, 0.1)


def test_a_single_failure_is_not_quarantined() -> None:
    stat = assess([Observation(i, SAME, "failed" if i == 4 else "passed") for i in range(10)])
    assert stat.flaky and stat.recovered and not should_quarantine(stat, 0.05)


def test_passing_on_rerun_is_flaky_whatever_the_family() -> None:
    stat = assess([Observation(1, ("t", "a"), "flaky"), Observation(2, ("t", "b"), "passed")])
    assert stat.flaky and stat.rate == 0.5 and "rerun" in stat.reason


def test_skips_do_not_count_and_threshold_one_turns_quarantine_off() -> None:
    stat = assess([Observation(1, SAME, "skipped"), Observation(2, SAME, "passed"),
                   Observation(3, SAME, "error")])
    assert stat.runs == 2 and stat.flaky
    assert not should_quarantine(stat, 1.0)
    assert not should_quarantine(FlakeStat(10, 1, True, "", recovered=True), 0.2)
    assert should_quarantine(FlakeStat(10, 2, True, "", recovered=True), 0.2)


def test_only_a_pass_is_clean() -> None:
    assert is_clean("passed")
    assert not any(is_clean(o) for o in ("failed", "flaky", "error", "crashed", "skipped"))
