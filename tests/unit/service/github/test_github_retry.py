"""The GitHub retry policy's edges that the loopback tests do not reach cheaply."""

from __future__ import annotations

import pytest

from service.github.retry import Backoff, Failure, GiveUp, decide

POLICY = Backoff(max_retries=4, base_delay_s=1.0, max_delay_s=10.0, max_wait_s=900.0, secondary_delay_s=60.0)
NOW = 1_800_000_000.0


def failure(status: int | None, message: str = "", **headers: str) -> Failure:
    return Failure(status, message, {k.replace("_", "-"): v for k, v in headers.items()})


def test_server_errors_back_off_exponentially_up_to_the_cap() -> None:
    waits = [decide(failure(502, "Server Error"), attempt, NOW, POLICY).retry_in_s for attempt in range(4)]
    assert waits == [1.0, 2.0, 4.0, 8.0]
    assert decide(failure(503), 3, NOW, Backoff(max_retries=9, max_delay_s=5.0)).retry_in_s == 5.0


def test_retries_are_bounded() -> None:
    decision = decide(failure(None, "no answer"), 4, NOW, POLICY)
    assert decision.retry_in_s is None and decision.give_up is GiveUp.LATER
    assert decision.reason == "no answer (gave up after 5 tries)"


def test_header_names_are_matched_whatever_their_case() -> None:
    upper = Failure(403, "You have exceeded a secondary rate limit", {"Retry-After": "12"})
    assert decide(upper, 0, NOW, POLICY).retry_in_s == 12.0


def test_a_secondary_limit_without_retry_after_waits_a_minute_then_longer() -> None:
    limited = failure(403, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.")
    assert [decide(limited, a, NOW, POLICY).retry_in_s for a in range(3)] == [60.0, 120.0, 240.0]


def test_a_bare_429_is_a_rate_limit_not_a_config_error() -> None:
    assert decide(failure(429, "Too Many Requests"), 0, NOW, POLICY).retry_in_s == 60.0


def test_a_primary_limit_waits_for_the_reset_and_a_past_reset_waits_only_the_margin() -> None:
    assert decide(failure(403, "API rate limit exceeded", x_ratelimit_remaining="0",
                          x_ratelimit_reset=str(int(NOW) + 90)), 0, NOW, POLICY).retry_in_s == 91.0
    assert decide(failure(403, "API rate limit exceeded", x_ratelimit_remaining="0",
                          x_ratelimit_reset=str(int(NOW) - 5)), 0, NOW, POLICY).retry_in_s == 1.0


def test_remaining_requests_mean_a_403_is_about_the_token() -> None:
    decision = decide(failure(403, "Must have admin rights to Repository.", x_ratelimit_remaining="4999",
                              x_ratelimit_reset=str(int(NOW) + 90)), 0, NOW, POLICY)
    assert decision.give_up is GiveUp.CREDENTIALS and decision.reason == "403 Must have admin rights to Repository."


@pytest.mark.parametrize("status", [404, 409, 422])
def test_client_errors_are_not_retried(status: int) -> None:
    decision = decide(failure(status, "Validation Failed"), 0, NOW, POLICY)
    assert decision.retry_in_s is None and decision.give_up is GiveUp.LATER
