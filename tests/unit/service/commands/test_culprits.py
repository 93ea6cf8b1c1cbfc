"""The upstream loop's write side on real SQLite and Postgres: ranges fixed when a
breakage opens, analysis and PR reports queued once, newer reports superseding older."""

from __future__ import annotations

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from service.commands import culprits, outbox
from service.models import (
    Breakage,
    OutboxKind,
    OutboxMessage,
    OutboxState,
    Run,
    RunState,
    TorchBuild,
)
from service.queries.regression import range_for
from tests.support.helpers import add_backend

REPO = "pytorch/pytorch"


def _run(session: Session, backend_id: int, state: str, git: str, spec: str = "nightly") -> Run:
    build = session.scalar(select(TorchBuild).where(TorchBuild.git_version == git))
    if build is None:
        build = TorchBuild(spec=spec, source_kind="nightly", version=f"2.14.0.dev+{git[:4]}",
                           git_version=git)
        session.add(build)
        session.flush()
    run = Run(backend_id=backend_id, torch_spec=spec, torch_build_id=build.id, state=state)
    session.add(run)
    session.flush()
    session.refresh(run)
    return run


def _breakage(session: Session, backend_id: int, run: Run, category: str = "upstream") -> Breakage:
    breakage = Breakage(backend_id=backend_id, fingerprint=f"fp{run.id}", fingerprint_version=1,
                        category=category, subtype="signature-changed", title="t",
                        first_seen_run_id=run.id, last_seen_run_id=run.id, occurrences=1)
    session.add(breakage)
    session.flush()
    return breakage


def _messages(session: Session, kind: str) -> list[OutboxMessage]:
    return list(session.scalars(select(OutboxMessage).where(OutboxMessage.kind == kind)
                                .order_by(OutboxMessage.id)))


def test_opened_upstream_breakage_gets_its_range_and_one_analysis(engine: Engine) -> None:
    with Session(engine) as session:
        backend = add_backend(session)
        _run(session, backend.id, RunState.PASSED, "a" * 40)
        green = _run(session, backend.id, RunState.PASSED, "b" * 40)
        # A green run on another track (a pin) must not be the base of a nightly's range.
        _run(session, backend.id, RunState.PASSED, "p" * 40, spec="pip:torch==2.13.0")
        red = _run(session, backend.id, RunState.FAILED, "c" * 40)
        breakage = _breakage(session, backend.id, red)
        culprits.after_run(session, red, [breakage], [], found=range_for(session, red), repo=REPO,
                           min_score=0.5)
        culprits.after_run(session, red, [breakage], [], found=range_for(session, red), repo=REPO,
                           min_score=0.5)
        assert (breakage.range_base_sha, breakage.range_head_sha) == ("b" * 40, "c" * 40)
        assert breakage.range_base_run_id == green.id and breakage.range_note is None
        assert len(_messages(session, OutboxKind.CULPRIT)) == 1


def test_no_earlier_green_says_so_and_asks_github_nothing(engine: Engine) -> None:
    with Session(engine) as session:
        backend = add_backend(session)
        red = _run(session, backend.id, RunState.FAILED, "c" * 40)
        breakage = _breakage(session, backend.id, red)
        culprits.after_run(session, red, [breakage], [], found=range_for(session, red), repo=REPO,
                           min_score=0.5)
        assert breakage.range_base_sha is None
        assert "no passed run" in (breakage.range_note or "")
        assert (breakage.culprits_note or "").startswith("no suspect")
        assert _messages(session, OutboxKind.CULPRIT) == []


def test_same_torch_on_both_ends_is_no_upstream_range(engine: Engine) -> None:
    with Session(engine) as session:
        backend = add_backend(session)
        _run(session, backend.id, RunState.PASSED, "a" * 40)
        red = _run(session, backend.id, RunState.FAILED, "a" * 40)
        breakage = _breakage(session, backend.id, red)
        culprits.after_run(session, red, [breakage], [], found=range_for(session, red), repo=REPO,
                           min_score=0.5)
        assert "same torch" in (breakage.range_note or "")
        assert _messages(session, OutboxKind.CULPRIT) == []


def test_pr_report_queued_only_when_confident_and_only_when_it_changed(engine: Engine) -> None:
    with Session(engine) as session:
        backend = add_backend(session)
        red = _run(session, backend.id, RunState.FAILED, "c" * 40)
        weak = _breakage(session, backend.id, red)
        culprits.store_suspects(session, weak, [{"sha": "x", "pr": 1, "score": 0.2}], None,
                                repo=REPO, min_score=0.5)
        assert _messages(session, OutboxKind.PR_REPORT) == []

        strong = _breakage(session, backend.id, _run(session, backend.id, RunState.FAILED, "d" * 40))
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
