"""The upstream loop's write side on real SQLite and Postgres: ranges fixed when a
breakage opens, analysis and PR reports queued once, newer reports superseding older."""

from __future__ import annotations

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from service.commands import culprits, outbox
from service.models import (
    OutboxKind,
    OutboxMessage,
    OutboxState,
    RunState,
)
from service.queries.regression import range_for
from tests.support.factories import make_backend, make_breakage, make_run

REPO = "pytorch/pytorch"


def _messages(session: Session, kind: str) -> list[OutboxMessage]:
    return list(session.scalars(select(OutboxMessage).where(OutboxMessage.kind == kind)
                                .order_by(OutboxMessage.id)))


def test_opened_upstream_breakage_gets_its_range_and_one_analysis(engine: Engine) -> None:
    with Session(engine) as session:
        backend = make_backend(session)
        make_run(session, backend, state=RunState.PASSED, git="a" * 40)
        green = make_run(session, backend, state=RunState.PASSED, git="b" * 40)
        # A green run on another track (a pin) must not be the base of a nightly's range.
        make_run(session, backend, state=RunState.PASSED, git="p" * 40, spec="pip:torch==2.13.0")
        red = make_run(session, backend, state=RunState.FAILED, git="c" * 40)
        breakage = make_breakage(session, backend, red)
        culprits.after_run(session, red, [breakage], [], found=range_for(session, red), repo=REPO,
                           min_score=0.5)
        culprits.after_run(session, red, [breakage], [], found=range_for(session, red), repo=REPO,
                           min_score=0.5)
        assert (breakage.range_base_sha, breakage.range_head_sha) == ("b" * 40, "c" * 40)
        assert breakage.range_base_run_id == green.id and breakage.range_note is None
        assert len(_messages(session, OutboxKind.CULPRIT)) == 1


def test_no_earlier_green_says_so_and_asks_github_nothing(engine: Engine) -> None:
    with Session(engine) as session:
        backend = make_backend(session)
        red = make_run(session, backend, state=RunState.FAILED, git="c" * 40)
        breakage = make_breakage(session, backend, red)
        culprits.after_run(session, red, [breakage], [], found=range_for(session, red), repo=REPO,
                           min_score=0.5)
        assert breakage.range_base_sha is None
        assert "no passed run" in (breakage.range_note or "")
        assert (breakage.culprits_note or "").startswith("no suspect")
        assert _messages(session, OutboxKind.CULPRIT) == []


def test_same_torch_on_both_ends_is_no_upstream_range(engine: Engine) -> None:
    with Session(engine) as session:
        backend = make_backend(session)
        make_run(session, backend, state=RunState.PASSED, git="a" * 40)
        red = make_run(session, backend, state=RunState.FAILED, git="a" * 40)
        breakage = make_breakage(session, backend, red)
        culprits.after_run(session, red, [breakage], [], found=range_for(session, red), repo=REPO,
                           min_score=0.5)
        assert "same torch" in (breakage.range_note or "")
        assert _messages(session, OutboxKind.CULPRIT) == []


def test_pr_report_queued_only_when_confident_and_only_when_it_changed(engine: Engine) -> None:
    with Session(engine) as session:
        backend = make_backend(session)
        red = make_run(session, backend, state=RunState.FAILED, git="c" * 40)
        weak = make_breakage(session, backend, red)
        culprits.store_suspects(session, weak, [{"sha": "x", "pr": 1, "score": 0.2}], None,
                                repo=REPO, min_score=0.5)
        assert _messages(session, OutboxKind.PR_REPORT) == []

        strong = make_breakage(session, backend, make_run(session, backend, state=RunState.FAILED, git="d" * 40))
        suspects = [{"sha": "y", "pr": 120969, "score": 0.9, "reasons": ["edits Allocator.h"]}]
        culprits.store_suspects(session, strong, suspects, None, repo=REPO, min_score=0.5)
        # The same state again queues nothing new.
        assert not culprits.request_pr_report(session, strong, repo=REPO, min_score=0.5)
        # One more occurrence: a newer report supersedes the pending one.
        strong.occurrences += 1
        assert culprits.request_pr_report(session, strong, repo=REPO, min_score=0.5)
        first, second = _messages(session, OutboxKind.PR_REPORT)
        assert first.state == OutboxState.SUPERSEDED and second.state == OutboxState.PENDING
        assert second.target == "pytorch/pytorch#120969"
        assert [m.id for m in outbox.due(session)] == [second.id]


def test_retry_backs_off_and_honours_githubs_wait(engine: Engine) -> None:
    with Session(engine) as session:
        assert outbox.enqueue(session, kind=OutboxKind.STATUS, target="s", dedupe_key="k")
        (message,) = outbox.due(session)
        outbox.mark_retry(message, "502 Bad Gateway")
        assert outbox.due(session) == []
        first_due = message.due_at
        outbox.mark_retry(message, "secondary rate limit", wait_s=7200)
        assert message.attempts == 2 and message.due_at > first_due
        assert message.state == OutboxState.PENDING and message.last_error == "secondary rate limit"
