"""The triage actions' rules (issue #30 item 2): input checks, when a snooze holds, when a
newer torch ends it, which PR a dispute may name; and the PR comment and label a dispute
makes."""

from __future__ import annotations

import datetime as dt

import pytest

from service.domain.pr_comment import BreakageReport, render
from service.domain.triage_actions import (
    TriageInputError,
    check_dispute,
    check_link,
    check_note,
    is_snoozed,
    parse_torch_version,
    parse_until,
    torch_ends_snooze,
)

NOW = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)


def test_until_takes_a_future_iso_date_or_datetime_and_refuses_the_rest() -> None:
    assert parse_until("2026-12-01", NOW) == dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    assert parse_until("2026-11-27T15:00:00+01:00", NOW) == dt.datetime(
        2026, 11, 27, 14, tzinfo=dt.UTC)
    for bad, says in (("2026-11-27", "not in the future"), ("2025-01-01", "not in the future"),
                      ("2026-13-01", "not an ISO date"), ("next week", "not an ISO date"),
                      ("", "not an ISO date")):
        with pytest.raises(TriageInputError, match=says):
            parse_until(bad, NOW)


def test_a_date_snooze_holds_until_its_date_and_a_torch_one_until_cleared() -> None:
    until = NOW + dt.timedelta(days=1)
    assert is_snoozed(until, None, NOW)
    assert not is_snoozed(until, None, until)
    assert is_snoozed(until.replace(tzinfo=None), None, NOW)  # SQLite's naive UTC
    assert is_snoozed(None, "2.14.0", NOW)
    assert not is_snoozed(None, None, NOW)


def test_only_a_newer_torch_ends_a_torch_snooze() -> None:
    assert torch_ends_snooze("2.14.0.dev20261122", "2.14.0.dev20261123+cpu")
    assert torch_ends_snooze("2.13.0", "2.13.1")
    assert not torch_ends_snooze("2.14.0.dev20261122", "2.14.0.dev20261122+cpu")
    assert not torch_ends_snooze("2.14.0.dev20261122", "2.14.0.dev20261121+cpu")
    assert not torch_ends_snooze(None, "2.14.0")
    assert not torch_ends_snooze("2.14.0", None)
    assert not torch_ends_snooze("2.14.0", "not-a-version")
    assert parse_torch_version(" 2.14.0.dev20261122 ") == "2.14.0.dev20261122"
    with pytest.raises(TriageInputError, match="not a torch version"):
        parse_torch_version("latest")


def test_links_and_notes_are_checked() -> None:
    assert check_link(" https://github.com/pytorch/pytorch/issues/1 ").endswith("/1")
    for bad in ("javascript:alert(1)", "ftp://x/y", "https://", "github.com/x", "http://a b"):
        with pytest.raises(TriageInputError):
            check_link(bad)
    assert check_note("  ") == ""
    with pytest.raises(TriageInputError, match="longer than"):
        check_note("x" * 4001)


def test_a_dispute_names_one_of_the_suspects_once() -> None:
    suspects = [{"pr": 7, "score": 0.9}, {"pr": None, "score": 0.5}, {"pr": 8, "score": 0.4}]
    check_dispute(8, suspects, [{"pr": 7}])
    with pytest.raises(TriageInputError, match="not a suspect"):
        check_dispute(9, suspects, [])
    with pytest.raises(TriageInputError, match="already disputed"):
        check_dispute(7, suspects, [{"pr": 7, "reason": "r"}])


def _report(**kw: object) -> BreakageReport:
    base: dict[str, object] = dict(
        breakage_id=3, backend="acme", category="upstream", subtype="signature-changed",
        title="signature-changed: allocate", decisive_line="error", base_version="a",
        head_version="b", base_sha="a" * 40, head_sha="b" * 40, occurrences=1, resolved=False,
        score=0.9, reasons=("edits Allocator.h",), url=None)
    base.update(kw)
    return BreakageReport(**base)  # type: ignore[arg-type]


def test_the_comment_of_a_disputed_pr_says_who_disputed_it_and_why() -> None:
    body = render(5, [_report(disputed_by="token:alice", dispute_reason="docs only")])
    assert "## ootci: disputed" in body
    assert "Not this PR, said token:alice: docs only" in body
    assert "Why this PR" not in body
    # Another open break still accuses the PR: that one leads.
    mixed = render(5, [_report(disputed_by="token:alice", dispute_reason="x"),
                       _report(breakage_id=4, backend="other")])
    assert "top suspect for 1 break " in mixed and "disputed: `acme`" in mixed
