"""The outbox drain against a real HTTP server speaking GitHub's REST API: a breakage's
range is listed and ranked, its PR labelled and commented on once, the comment edited as
nights go by and when the breakage resolves; outages delay and never lose or duplicate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from service.commands import culprits, verifications
from service.domain.pr_comment import MARKER
from service.domain.verification import Verification, VerifyState
from service.github.client import GitHubClient
from service.github.reporter import ReportSettings, drain
from service.models import (
    Breakage,
    BreakageStatus,
    OutboxKind,
    OutboxMessage,
    OutboxState,
)
from tests.support.fake_github import FakeGitHub
from tests.support.upstream_rows import CASE, breakage_with_range

pytest_plugins = ["tests.support.github_fixtures"]

REPO = "pytorch/pytorch"
LABEL = "module: PrivateUse1-break"


def _cfg(**kw: Any) -> ReportSettings:
    base: dict[str, Any] = dict(repo=REPO, label=LABEL, min_score=0.5,
                                public_url="https://ootci.example", unlabel_on_fix=True,
                                can_write=True, label_unverified=True)
    base.update(kw)
    return ReportSettings(**base)


def _client(fake: FakeGitHub, token: str | None = None, sleeps: list[float] | None = None) -> GitHubClient:
    return GitHubClient(fake.url, fake.token if token is None else token, REPO,
                        write_interval_s=0, sleep=(sleeps.append if sleeps is not None else lambda s: None))


def _messages(session: Session) -> list[OutboxMessage]:
    return list(session.scalars(select(OutboxMessage).order_by(OutboxMessage.id)))


def test_range_ranked_pr_labelled_one_comment_edited_then_resolved(
    engine: Engine, fake_github: FakeGitHub
) -> None:
    base, head = fake_github.load_compare_case(CASE)
    sessions = sessionmaker(engine)
    with sessions() as session:
        breakage_id = breakage_with_range(session, base, head).id

    # Night 2: the range is listed and ranked, then the report goes out.
    first = drain(sessions, _client(fake_github), _cfg())
    assert first.sent == 2 and first.errors == []
    with sessions() as session:
        breakage = session.get(Breakage, breakage_id)
        assert breakage is not None and breakage.culprits[0]["pr"] == 120969
        assert breakage.culprits[0]["score"] >= 0.5 and breakage.culprits_note is None
    (comment,) = fake_github.comments(REPO, 120969)
    assert comment["body"].startswith(MARKER)
    assert "`torch_openreg`" in comment["body"] and "marked 'override'" in comment["body"]
    assert "https://ootci.example/breakages/" in comment["body"]
    assert fake_github.labels(REPO, 120969) == [LABEL]

    # Night 3: seen again -> the same comment is edited, not a second one posted.
    with sessions() as session:
        breakage = session.get(Breakage, breakage_id)
        assert breakage is not None
        breakage.occurrences = 2
        assert culprits.request_pr_report(session, breakage, repo=REPO, min_score=0.5)
        session.commit()
    assert drain(sessions, _client(fake_github), _cfg()).sent == 1
    (edited,) = fake_github.comments(REPO, 120969)
    assert edited["id"] == comment["id"] and "seen 2 times" in edited["body"]

    # A fix night: the breakage resolves; the comment says so and the label goes.
    with sessions() as session:
        breakage = session.get(Breakage, breakage_id)
        assert breakage is not None
        breakage.status = BreakageStatus.RESOLVED
        culprits.request_pr_report(session, breakage, repo=REPO, min_score=0.5)
        session.commit()
    assert drain(sessions, _client(fake_github), _cfg()).sent == 1
    (final,) = fake_github.comments(REPO, 120969)
    assert final["id"] == comment["id"] and "## ootci: resolved" in final["body"]
    assert fake_github.labels(REPO, 120969) == []


def test_by_default_only_a_confirmed_suspect_is_labelled_and_the_comment_says_which(
    engine: Engine, fake_github: FakeGitHub
) -> None:
    base, head = fake_github.load_compare_case(CASE)
    sessions = sessionmaker(engine)
    with sessions() as session:
        breakage_id = breakage_with_range(session, base, head).id
    cfg = _cfg(label_unverified=False)

    assert drain(sessions, _client(fake_github), cfg).errors == []
    (comment,) = fake_github.comments(REPO, 120969)
    assert "**suspected** (not verified: no verification has run)" in comment["body"]
    assert fake_github.labels(REPO, 120969) == []  # a score alone accuses no one

    evidence = ("undoing this PR's changes to c10/core/Allocator.h makes torch_openreg build "
                "and pass its tests")
    with sessions() as session:
        breakage = session.get_one(Breakage, breakage_id)
        top = breakage.culprits[0]
        verifications.record(session, breakage, [
            Verification(top["sha"], top["pr"], VerifyState.CONFIRMED, evidence, run_id=None)
        ], repo=REPO, min_score=0.5)
        session.commit()
    assert drain(sessions, _client(fake_github), cfg).sent == 1
    (edited,) = fake_github.comments(REPO, 120969)
    assert edited["id"] == comment["id"] and f"**confirmed**: {evidence}" in edited["body"]
    assert fake_github.labels(REPO, 120969) == [LABEL]


def test_a_refuted_top_suspect_is_not_reported_and_never_labelled(
    engine: Engine, fake_github: FakeGitHub
) -> None:
    base, head = fake_github.load_compare_case(CASE)
    sessions = sessionmaker(engine)
    with sessions() as session:
        breakage = breakage_with_range(session, base, head)
        breakage_id = breakage.id
    drain(sessions, _client(fake_github), _cfg(label_unverified=False))
    with sessions() as session:
        breakage = session.get_one(Breakage, breakage_id)
        suspects = breakage.culprits
        verifications.record(session, breakage, [
            Verification(s["sha"], s["pr"], VerifyState.REFUTED, "still fails") for s in suspects
        ], repo=REPO, min_score=0.5)
        assert culprits.reported_pr(breakage, 0.5) is None
        session.commit()
    assert fake_github.labels(REPO, 120969) == []


def test_502_then_200_delivers_the_report_exactly_once(engine: Engine, fake_github: FakeGitHub) -> None:
    base, head = fake_github.load_compare_case(CASE)
    sessions = sessionmaker(engine)
    with sessions() as session:
        breakage_with_range(session, base, head)
    fake_github.fail_with_5xx(times=2, status=502, method="POST", path=r"/issues/\d+/comments$")
    result = drain(sessions, _client(fake_github), _cfg())
    assert result.sent == 2
    assert len(fake_github.comments(REPO, 120969)) == 1


def test_an_outage_longer_than_the_client_waits_keeps_the_message_for_later(
    engine: Engine, fake_github: FakeGitHub
) -> None:
    base, head = fake_github.load_compare_case(CASE)
    sessions = sessionmaker(engine)
    with sessions() as session:
        breakage_with_range(session, base, head)
    outage = fake_github.fail_with_5xx(times=1000, status=503, method="POST", path=r"/labels$")
    result = drain(sessions, _client(fake_github), _cfg())
    assert result.retried == 1 and fake_github.comments(REPO, 120969) == []
    with sessions() as session:
        report = [m for m in _messages(session) if m.kind == OutboxKind.PR_REPORT]
        assert [m.state for m in report] == [OutboxState.PENDING]
        assert "503" in (report[0].last_error or "")
        report[0].due_at = report[0].created_at  # as if the backoff had passed
        session.commit()
    outage.times = 0
    assert drain(sessions, _client(fake_github), _cfg()).sent == 1
    assert len(fake_github.comments(REPO, 120969)) == 1


def test_a_rejected_token_is_a_clear_error_and_loses_nothing(engine: Engine, fake_github: FakeGitHub) -> None:
    base, head = fake_github.load_compare_case(CASE)
    sessions = sessionmaker(engine)
    with sessions() as session:
        breakage_with_range(session, base, head)
    result = drain(sessions, _client(fake_github, token="ghp_wrong"), _cfg())
    assert result.sent == 0 and any("rejected the token" in e for e in result.errors)
    with sessions() as session:
        (message,) = _messages(session)
        assert message.state == OutboxState.PENDING and "rejected the token" in (message.last_error or "")
    assert fake_github.writes() == []


def test_without_a_token_the_report_is_a_dry_run_shown_not_sent(engine: Engine, fake_github: FakeGitHub) -> None:
    base, head = fake_github.load_compare_case(CASE)
    sessions = sessionmaker(engine)
    with sessions() as session:
        breakage_with_range(session, base, head)
    result = drain(sessions, _client(fake_github, token=""), _cfg(can_write=False))
    assert result.sent == 1 and result.dry_run == 1  # the ranking (a read) and the report
    assert fake_github.writes() == []
    with sessions() as session:
        report = [m for m in _messages(session) if m.kind == OutboxKind.PR_REPORT]
        assert report[0].state == OutboxState.DRY_RUN
        assert report[0].result["body"].startswith(MARKER) and report[0].result["label_op"] == "add"


def test_the_drain_after_an_interactive_run_tries_github_once_and_keeps_the_rest(
    engine: Engine, fake_github: FakeGitHub, tmp_path: Path
) -> None:
    """Someone waits at the terminal after `ootci run`: a GitHub that is down costs one
    request, and the message waits for the next drain."""
    from service.config import Settings
    from service.github.reporter import drain_quietly

    base, head = fake_github.load_compare_case(CASE)
    sessions = sessionmaker(engine)
    with sessions() as session:
        breakage_with_range(session, base, head)
    fake_github.fail_with_5xx(times=1000, status=503)
    settings = Settings(home=tmp_path, github_api_url=fake_github.url,
                        github_token=fake_github.token)
    before = len(fake_github.requests)
    result = drain_quietly(settings, sessions)
    assert result is not None and result.retried == 1 and result.sent == 0
    assert len(fake_github.requests) - before == 1
    with sessions() as session:
        assert [m.state for m in _messages(session)] == [OutboxState.PENDING]
