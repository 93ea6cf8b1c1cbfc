import hashlib
import hmac

import pytest

from service.domain.notify import (
    Channel,
    Event,
    NotifyInputError,
    body,
    check_target,
    digest_text,
    headline,
    parse_events,
    shown,
    sign,
)


def test_events_parse_in_a_stable_order_and_unknown_ones_are_named() -> None:
    assert parse_events("resolved, new-breakage,resolved") == [Event.NEW_BREAKAGE, Event.RESOLVED]
    with pytest.raises(NotifyInputError, match="unknown event 'boom'"):
        parse_events("new-breakage,boom")
    with pytest.raises(NotifyInputError, match="at least one event"):
        parse_events(" , ")


@pytest.mark.parametrize(("channel", "target", "digest", "says"), [
    (Channel.EMAIL, "not-an-address", False, "not an email address"),
    (Channel.WEBHOOK, "ftp://x", False, "not an http(s) URL"),
    (Channel.CHAT, "https://chat.example/hook", True, "--digest daily is for --email"),
])
def test_bad_targets_are_refused(channel: Channel, target: str, digest: bool, says: str) -> None:
    with pytest.raises(NotifyInputError, match=says.replace("(", r"\(").replace(")", r"\)")):
        check_target(channel, target, digest=digest)


def test_the_signature_is_hmac_sha256_of_the_exact_body() -> None:
    raw = body({"b": 1, "a": "x"})
    assert raw == b'{"a":"x","b":1}'
    assert sign("k", raw) == "sha256=" + hmac.new(b"k", raw, hashlib.sha256).hexdigest()


def test_headlines_and_digest() -> None:
    p = {"event": "new-breakage", "backend": "acme", "subject": {"id": 4, "title": "sig"}}
    assert headline(p) == "[acme] new breakage 4: sig"
    subject, text = digest_text([p, {**p, "event": "resolved"}])
    assert subject == "ootci daily digest: 2 events (acme)"
    assert "[acme] breakage 4 resolved: sig" in text


def test_lists_show_a_webhook_url_only_to_its_host() -> None:
    assert shown("chat", "https://hooks.slack.com/services/T0/B0/XXXX") == "https://hooks.slack.com/…"
    assert shown("webhook", "https://user:pw@h.example/") == "https://h.example"
    assert shown("email", "ci@acme.example") == "ci@acme.example"
