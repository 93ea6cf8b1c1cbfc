"""Notifications end to end on loopback (issue #30 item 2): a webhook receiver that checks
the HMAC, a chat webhook and a real SMTP server (aiosmtpd) each get the event; while a
receiver is down the message waits in the outbox and goes out once it is back, never
lost and never twice; a daily digest is one email; an SMTP server that refuses leaves the
message failed with a one-line reason; events come from where breakages open and culprits
are ranked."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from service.commands.culprits import store_suspects
from service.commands.notifications import add_subscription, notify
from service.config import Settings
from service.db import session_scope
from service.domain.notify import Event
from service.models import OutboxKind, OutboxMessage, OutboxState, Subscription, utcnow
from service.notify.drain import drain
from tests.support.factories import make_backend, make_breakage, make_finished_run
from tests.support.receivers import HttpReceiver, SmtpReceiver

SUBJECT = {"id": 7, "title": "c10::Allocator::allocate changed", "category": "upstream"}


@pytest.fixture
def receivers() -> Iterator[tuple[HttpReceiver, SmtpReceiver]]:
    http, smtp = HttpReceiver(), SmtpReceiver()
    yield http, smtp
    http.stop()
    smtp.stop()


def sessions(engine: Engine):  # type: ignore[no-untyped-def]
    return lambda: Session(engine)


def subscribe(engine: Engine, http: HttpReceiver, smtp_to: str = "ci@acme.example",
              *, digest: bool = False) -> None:
    with session_scope(engine) as s:
        make_backend(s, "acme")
        hook = add_subscription(s, "acme", "new-breakage,resolved", "webhook",
                                http.url + "/hook", actor="test")
        http.secret = hook.secret or ""
        add_subscription(s, "acme", "new-breakage", "chat", http.url + "/chat", actor="test")
        add_subscription(s, "acme", "new-breakage", "email", smtp_to, digest=digest,
                         actor="test")


def states(engine: Engine) -> list[tuple[str, str, int]]:
    with session_scope(engine) as s:
        return [(m.kind, m.state, m.attempts)
                for m in s.scalars(select(OutboxMessage).order_by(OutboxMessage.id))]


def test_an_outage_of_every_receiver_delays_and_never_loses_the_event(
    engine: Engine, receivers: tuple[HttpReceiver, SmtpReceiver],
) -> None:
    http, smtp = receivers
    settings = Settings(smtp_url=smtp.url, smtp_from="ootci@ci.example")
    subscribe(engine, http)
    with session_scope(engine) as s:
        backend_id = s.scalar(select(Subscription.backend_id).limit(1))
        assert backend_id is not None
        assert notify(s, backend_id, Event.NEW_BREAKAGE, SUBJECT, key="breakage:7",
                      url="https://ootci.example/breakages/7") == 3
    # Every receiver down: nothing is sent, nothing lost, each retried later.
    down = drain(sessions(engine), settings)
    assert (down.sent, down.retried, down.failed) == (0, 3, 0)
    assert states(engine) == [("notify", "pending", 1)] * 3
    # Back up: a drain before the backoff ends sends nothing; after it, everything, once.
    http.start()
    smtp.start()
    assert drain(sessions(engine), settings).sent == 0
    later = utcnow() + dt.timedelta(minutes=2)
    assert drain(sessions(engine), settings, now=later).sent == 3
    assert drain(sessions(engine), settings, now=later + dt.timedelta(hours=2)).sent == 0
    assert states(engine) == [("notify", "sent", 2)] * 3
    # The webhook's HMAC checked out (the receiver refuses a bad one), its body the event.
    assert http.bad_signatures == 0 and len(http.hooks) == 1
    assert http.hooks[0]["event"] == "new-breakage" and http.hooks[0]["subject"]["id"] == 7
    assert http.chats == ["[acme] new breakage 7: c10::Allocator::allocate changed\n"
                          "https://ootci.example/breakages/7"]
    (mail,) = smtp.messages
    assert mail["To"] == "ci@acme.example" and mail["From"] == "ootci@ci.example"
    assert mail["Subject"] == "[acme] new breakage 7: c10::Allocator::allocate changed"
    # The same event again (a replayed run) queues nothing.
    with session_scope(engine) as s:
        assert notify(s, backend_id, Event.NEW_BREAKAGE, SUBJECT, key="breakage:7") == 0


def test_a_forged_signature_is_refused_by_the_receiver_and_kept_failed(
    engine: Engine, receivers: tuple[HttpReceiver, SmtpReceiver],
) -> None:
    http, _ = receivers
    subscribe(engine, http)
    http.secret = "not-the-subscription-secret"
    http.start()
    with session_scope(engine) as s:
        backend_id = s.scalar(select(Subscription.backend_id).limit(1))
        assert backend_id is not None
        notify(s, backend_id, Event.RESOLVED, SUBJECT, key="breakage:7")
    result = drain(sessions(engine), Settings())
    assert http.bad_signatures == 1 and result.failed == 1
    assert "answered 401" in result.errors[0]


def test_a_refusing_smtp_server_fails_the_message_with_one_line(
    engine: Engine, receivers: tuple[HttpReceiver, SmtpReceiver],
) -> None:
    http, smtp = receivers
    smtp.refuse = True
    smtp.start()
    http.start()
    subscribe(engine, http, smtp_to="nobody@acme.example")
    with session_scope(engine) as s:
        backend_id = s.scalar(select(Subscription.backend_id).limit(1))
        assert backend_id is not None
        notify(s, backend_id, Event.NEW_BREAKAGE, SUBJECT, key="breakage:7")
    drain(sessions(engine), Settings(smtp_url=smtp.url))
    with session_scope(engine) as s:
        email = s.scalars(select(OutboxMessage).where(
            OutboxMessage.state == OutboxState.FAILED)).one()
        assert email.last_error is not None and "\n" not in email.last_error
        assert "refused nobody@acme.example: 550" in email.last_error
    assert smtp.messages == []


def test_a_daily_digest_is_one_email_at_its_hour(
    engine: Engine, receivers: tuple[HttpReceiver, SmtpReceiver],
) -> None:
    http, smtp = receivers
    http.start()
    smtp.start()
    subscribe(engine, http, digest=True)
    with session_scope(engine) as s:
        backend_id = s.scalar(select(Subscription.backend_id).limit(1))
        assert backend_id is not None
        for n in (7, 8):
            notify(s, backend_id, Event.NEW_BREAKAGE, {**SUBJECT, "id": n}, key=f"b:{n}")
    settings = Settings(smtp_url=smtp.url)
    drain(sessions(engine), settings)  # the webhooks and chats go now
    assert smtp.messages == [] and len(http.hooks) == 2
    drain(sessions(engine), settings, now=utcnow() + dt.timedelta(days=1, minutes=1))
    (mail,) = smtp.messages
    assert mail["Subject"] == "ootci daily digest: 2 events (acme)"
    text = mail.get_payload()
    assert "new breakage 7" in str(text) and "new breakage 8" in str(text)
    with session_scope(engine) as s:
        digest = s.scalars(select(OutboxMessage).where(
            OutboxMessage.kind == OutboxKind.NOTIFY_DIGEST)).all()
        assert [m.state for m in digest] == ["sent", "sent"]


def test_a_confident_suspect_notifies_culprit_confirmed(engine: Engine) -> None:
    with session_scope(engine) as s:
        b = make_backend(s, "acme")
        add_subscription(s, "acme", "culprit-confirmed", "chat", "https://chat.example/h",
                         actor="test")
        breakage = make_breakage(s, b, make_finished_run(s, b))
        store_suspects(s, breakage, [{"sha": "f" * 40, "pr": 1234, "score": 0.3}], None,
                       repo="pytorch/pytorch", min_score=0.5)
        assert s.scalar(select(func.count()).select_from(OutboxMessage)
                        .where(OutboxMessage.kind == OutboxKind.NOTIFY)) == 0
        store_suspects(s, breakage, [{"sha": "e" * 40, "pr": 1234, "score": 0.82,
                                      "title": "Change allocate()"}], None,
                       repo="pytorch/pytorch", min_score=0.5)
        sent = s.scalars(select(OutboxMessage).where(OutboxMessage.kind == OutboxKind.NOTIFY)
                         ).one()
        assert sent.payload["event"] == "culprit-confirmed"
        assert sent.payload["subject"]["culprit"] == "Change allocate()"


def test_a_breakage_opened_and_resolved_by_runs_notifies_and_github_never_sees_it(
    engine: Engine,
) -> None:
    from service.commands import outbox
    from service.domain.states import StepStatus
    from tests.support.helpers import fixture_log
    from workers.pipeline.steps.outcome import StepOutcome
    from workers.pipeline.testrun.records import TestRunOutcome
    from workers.pipeline.verdict.collect import collect

    settings = Settings(public_url="https://ootci.example")
    with session_scope(engine) as s:
        b = make_backend(s, "acme")
        add_subscription(s, "acme", "new-breakage,resolved", "chat", "https://chat.example/h",
                         actor="test")
    for log in (None, "build_allocator_const.log", "build_allocator_const.log", None):
        with session_scope(engine) as s:
            run = make_finished_run(s, s.get_one(type(b), b.id),
                                    build_log=fixture_log(log) if log else None)
            build = StepOutcome(StepStatus.FAILED if log else StepStatus.PASSED, 1 if log else 0)
            tests = None if log else TestRunOutcome(StepOutcome(StepStatus.PASSED, 0), ())
            run.transition(collect(s, run, build, tests, settings, lambda _t: None))
    with session_scope(engine) as s:
        told = [(m.payload["event"], m.payload["url"]) for m in s.scalars(
            select(OutboxMessage).where(OutboxMessage.kind == OutboxKind.NOTIFY)
            .order_by(OutboxMessage.id))]
        breakage_url = told[0][1]
        assert [e for e, _ in told] == ["new-breakage", "resolved"]
        assert breakage_url.startswith("https://ootci.example/breakages/")
        # GitHub's drain asks for due messages without naming kinds: never these.
        assert all(m.kind not in ("notify", "notify-digest") for m in outbox.due(s))


def test_an_errored_run_notifies_run_errored_once(engine: Engine) -> None:
    from service.domain.states import StepStatus
    from tests.support.helpers import fixture_log
    from workers.pipeline.steps.outcome import StepOutcome
    from workers.pipeline.verdict.collect import collect

    with session_scope(engine) as s:
        b = make_backend(s, "acme")
        add_subscription(s, "acme", "run-errored", "chat", "https://chat.example/h",
                         actor="test")
        run = make_finished_run(s, b, build_log=fixture_log("build_allocator_const.log"))
        state = collect(s, run, StepOutcome(StepStatus.ERRORED, None, "the build timed out"),
                        None, Settings(), lambda _t: None)
        assert state.value == "errored"
        run_id = run.id
    with session_scope(engine) as s:
        (told,) = s.scalars(select(OutboxMessage).where(OutboxMessage.kind == OutboxKind.NOTIFY))
        assert told.payload["event"] == "run-errored"
        assert told.payload["subject"]["id"] == run_id
