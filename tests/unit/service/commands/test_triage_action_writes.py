"""Triage actions on real SQLite and Postgres: each writes its change and one audit entry
together, bad input writes nothing, a dispute passes the suspect over and queues its PR's
report, a snooze is the one gate of labels, comments and notifications, a closed breakage
that recurs reopens, and a newer torch ends a torch snooze."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from service.commands import culprits, triage_actions
from service.commands.breakages import is_muted, record_occurrences
from service.commands.notifications import add_subscription, notify_breakage
from service.domain.notify import Event
from service.domain.triage_actions import TriageInputError
from service.models import (
    AuditEntry,
    Breakage,
    BreakageStatus,
    Failure,
    OutboxKind,
    OutboxMessage,
    RunState,
    utcnow,
)
from tests.support.factories import make_backend, make_breakage, make_run

REPO = "pytorch/pytorch"
SUSPECTS = [{"sha": "a" * 40, "pr": 101, "title": "moves Allocator", "score": 0.9, "reasons": []},
            {"sha": "b" * 40, "pr": 202, "title": "edits docs", "score": 0.6, "reasons": []}]


def _breakage(session: Session) -> Breakage:
    backend = make_backend(session)
    red = make_run(session, backend, state=RunState.FAILED, git="c" * 40)
    return make_breakage(session, backend, red, culprits=list(SUSPECTS))


def _audit(session: Session) -> list[tuple[str, str, str]]:
    return [(e.actor, e.action, e.target)
            for e in session.scalars(select(AuditEntry).order_by(AuditEntry.id))]


def _pr_reports(session: Session) -> list[str]:
    return [m.target for m in session.scalars(
        select(OutboxMessage).where(OutboxMessage.kind == OutboxKind.PR_REPORT)
        .order_by(OutboxMessage.id))]


def test_each_action_writes_and_audits_who_what_and_why(engine: Engine) -> None:
    with Session(engine) as s:
        b = _breakage(s)
        triage_actions.set_note(s, b.id, "  looks like #1  ", actor="token:alice")
        triage_actions.add_link(s, b.id, "https://github.com/pytorch/pytorch/issues/9",
                                actor="token:alice")
        triage_actions.snooze(s, b.id, until="2099-01-01", reason="known", actor="token:bob")
        triage_actions.close(s, b.id, "won't fix here", actor="token:bob")
        triage_actions.reopen(s, b.id, actor="token:bob")
        s.commit()
        s.refresh(b)
        assert b.note == "looks like #1"
        assert [link["url"] for link in b.links] == ["https://github.com/pytorch/pytorch/issues/9"]
        assert b.snoozed_until == dt.datetime(2099, 1, 1, tzinfo=dt.UTC)
        assert (b.snoozed_by, b.snooze_reason) == ("token:bob", "known")
        assert b.status == BreakageStatus.OPEN and b.closed_at is None
        target = f"breakage:{b.id}"
        assert _audit(s) == [("token:alice", "breakage.note", target),
                             ("token:alice", "breakage.link", target),
                             ("token:bob", "breakage.snooze", target),
                             ("token:bob", "breakage.close", target),
                             ("token:bob", "breakage.reopen", target)]
        close = s.scalars(select(AuditEntry).where(AuditEntry.action == "breakage.close")).one()
        assert close.detail["reason"] == "won't fix here"


@pytest.mark.parametrize("act, says", [
    (lambda s, i: triage_actions.snooze(s, i, until="2001-01-01", actor="a"), "not in the future"),
    (lambda s, i: triage_actions.snooze(s, i, until="soon", actor="a"), "not an ISO date"),
    (lambda s, i: triage_actions.snooze(s, i, actor="a"), "give one of them"),
    (lambda s, i: triage_actions.snooze(s, i, until="2099-01-01", torch="2.14", actor="a"),
     "give one of them"),
    (lambda s, i: triage_actions.add_link(s, i, "javascript:x", actor="a"), "not an http"),
    (lambda s, i: triage_actions.dispute(s, i, 999, "x", actor="a", repo=REPO, min_score=0.5),
     "not a suspect"),
    (lambda s, i: triage_actions.dispute(s, i, 101, " ", actor="a", repo=REPO, min_score=0.5),
     "reason is empty"),
    (lambda s, i: triage_actions.reopen(s, i, actor="a"), "open already"),
])
def test_bad_input_is_refused_and_writes_nothing(engine: Engine, act, says: str) -> None:  # type: ignore[no-untyped-def]
    with Session(engine) as s:
        b = _breakage(s)
        s.commit()
        with pytest.raises(TriageInputError, match=says):
            act(s, b.id)
        s.commit()  # whatever the failed action left in the session
        s.refresh(b)
        assert (b.snoozed_until, b.links, b.disputes, b.status) == (None, [], [], "open")
        assert _audit(s) == [] and _pr_reports(s) == []


def test_an_unknown_breakage_is_said_so(engine: Engine) -> None:
    with Session(engine) as s, pytest.raises(triage_actions.UnknownBreakage, match="breakage 77 "):
        triage_actions.close(s, 77, actor="a")


def test_a_dispute_passes_the_suspect_over_and_queues_both_prs_reports(engine: Engine) -> None:
    with Session(engine) as s:
        b = _breakage(s)
        assert culprits.reported_pr(b, 0.5) == 101
        triage_actions.dispute(s, b.id, 101, "touches docs only", actor="token:alice", repo=REPO,
                               min_score=0.5)
        s.commit()
        assert b.disputes[0]["pr"] == 101 and b.disputes[0]["by"] == "token:alice"
        # This breakage only: the next suspect is reported in its place.
        assert culprits.reported_pr(b, 0.5) == 202
        assert _pr_reports(s) == [f"{REPO}#101", f"{REPO}#202"]
        assert culprits.breakages_on_pr(s, 101, 0.5) == [b]  # its comment says disputed
        with pytest.raises(TriageInputError, match="already disputed"):
            triage_actions.dispute(s, b.id, 101, "again", actor="x", repo=REPO, min_score=0.5)


def test_a_snoozed_breakage_asks_for_no_report_and_no_notification(engine: Engine) -> None:
    with Session(engine) as s:
        b = _breakage(s)
        add_subscription(s, _backend_name(s, b), "resolved", "webhook",
                         "http://127.0.0.1:9/hook", actor="test")
        triage_actions.snooze(s, b.id, until=(utcnow() + dt.timedelta(days=2)).date().isoformat(),
                              actor="token:bob")
        assert is_muted(b)
        assert culprits.reported_pr(b, 0.5) is None
        b.occurrences += 1
        assert not culprits.request_pr_report(s, b, repo=REPO, min_score=0.5)
        assert notify_breakage(s, b, Event.RESOLVED, {"id": b.id}, key="k") == 0
        assert _pr_reports(s) == []
        # Once the date passes, it speaks again.
        assert not is_muted(b, utcnow() + dt.timedelta(days=3))
        b.snoozed_until = utcnow() - dt.timedelta(seconds=1)
        assert culprits.request_pr_report(s, b, repo=REPO, min_score=0.5)
        assert notify_breakage(s, b, Event.RESOLVED, {"id": b.id}, key="k") == 1


def _backend_name(s: Session, b: Breakage) -> str:
    from service.models import Backend
    return s.get_one(Backend, b.backend_id).name


def _recur(s: Session, b: Breakage, git: str, version: str) -> None:
    from service.models import Backend
    from tests.support.factories import make_torch_build

    make_torch_build(s, git, version=version)
    run = make_run(s, s.get_one(Backend, b.backend_id), state=RunState.FAILED, git=git)
    failure = Failure(run_id=run.id, step_name="build", stage="build", fingerprint=b.fingerprint,
                      fingerprint_version=b.fingerprint_version, triage="upstream",
                      subtype="signature-changed", line="error")
    s.add(failure)
    s.flush()
    record_occurrences(s, run, [failure])


def test_a_closed_breakage_that_recurs_reopens_and_a_newer_torch_ends_a_torch_snooze(
    engine: Engine,
) -> None:
    with Session(engine) as s:
        b = _breakage(s)
        triage_actions.close(s, b.id, "fixed in the vendor", actor="token:bob")
        triage_actions.snooze(s, b.id, torch="2.14.0.dev20261122", actor="token:bob")
        _recur(s, b, "d" * 40, "2.14.0.dev20261122+cpu")
        assert b.status == BreakageStatus.OPEN and b.closed_at is None
        assert is_muted(b)  # the same torch: still the one the person accepted
        _recur(s, b, "e" * 40, "2.14.0.dev20261123+cpu")
        assert not is_muted(b) and b.snoozed_until_torch is None
        assert s.scalar(select(func.count()).select_from(Failure)) == 2
