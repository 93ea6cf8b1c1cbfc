"""When to retry a failed GitHub request, and after how long: pure, so the policy is
testable without a clock or a network.

The rules are GitHub's ("Rate limits for the REST API", "Best practices"):
- a primary limit is a 403/429 with ``x-ratelimit-remaining: 0``: wait until
  ``x-ratelimit-reset`` (epoch seconds);
- a secondary limit is a 403/429 whose message says so, or that carries ``retry-after``:
  wait ``retry-after`` seconds, else at least a minute, growing exponentially;
- 5xx and no answer at all (connection refused, timeout) are transient: exponential backoff;
- 401, and a 403 that is not a rate limit, are the token's fault: do not retry;
- anything else (404, 409, 422, ...) will not get better by retrying now.
A wait longer than ``max_wait_s`` is not slept through: the caller's outbox retries later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum


@dataclass(frozen=True)
class Backoff:
    max_retries: int = 4
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    max_wait_s: float = 900.0
    # Secondary limits without a retry-after: GitHub asks for at least one minute.
    secondary_delay_s: float = 60.0


@dataclass(frozen=True)
class Failure:
    """One failed request: ``status`` None means no HTTP answer (connection, timeout)."""

    status: int | None
    message: str
    headers: Mapping[str, str]

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        for key, value in self.headers.items():
            if key.lower() == wanted:
                return str(value)
        return None

    def describe(self) -> str:
        return f"{self.status} {self.message}" if self.status is not None else self.message


class GiveUp(Enum):
    CREDENTIALS = "credentials"
    LATER = "later"


@dataclass(frozen=True)
class Decision:
    retry_in_s: float | None  # None: give up
    give_up: GiveUp | None = None
    reason: str = ""


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _rate_limit_wait(failure: Failure, attempt: int, now: float, policy: Backoff) -> float | None:
    """Seconds GitHub asks us to wait, or None when this failure is not a rate limit."""
    if failure.status not in (403, 429):
        return None
    retry_after = _seconds(failure.header("retry-after"))
    if retry_after is not None:
        return max(retry_after, 0.0)
    reset = _seconds(failure.header("x-ratelimit-reset"))
    if failure.header("x-ratelimit-remaining") == "0" and reset is not None:
        # One second more: the reset instant is whole seconds and clocks drift.
        return max(reset - now, 0.0) + 1.0
    if "rate limit" in failure.message.lower() or failure.status == 429:
        return float(policy.secondary_delay_s * 2**attempt)
    return None


def decide(failure: Failure, attempt: int, now: float, policy: Backoff) -> Decision:
    """What to do after ``failure`` on try number ``attempt`` (0 for the first try)."""
    wait = _rate_limit_wait(failure, attempt, now, policy)
    if wait is None and failure.status in (401, 403):
        return Decision(None, GiveUp.CREDENTIALS, failure.describe())
    if wait is None:
        transient = failure.status is None or failure.status >= 500
        if not transient:
            return Decision(None, GiveUp.LATER, failure.describe())
        wait = min(policy.base_delay_s * 2**attempt, policy.max_delay_s)
    if attempt >= policy.max_retries:
        return Decision(None, GiveUp.LATER, f"{failure.describe()} (gave up after {attempt + 1} tries)")
    if wait > policy.max_wait_s:
        return Decision(None, GiveUp.LATER, f"{failure.describe()} (GitHub asks to wait {wait:.0f}s)")
    return Decision(wait, None, failure.describe())
