"""A delivery is parsed once into what it is about; routing then reads the typed view."""

from __future__ import annotations

import json
from typing import Any

import pytest

from service.github.events import (
    PayloadError,
    PullRequestEvent,
    PushEvent,
    Unrouted,
    parse_delivery,
)
from tests.support.paths import FIXTURES


def _payload(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / "webhooks" / name).read_text())
    return loaded


def test_a_direct_pull_request_is_its_typed_event() -> None:
    parsed = parse_delivery("pull_request", _payload("pull_request_labeled.json"))
    assert parsed.event == "pull_request" and parsed.via is None
    assert isinstance(parsed.subject, PullRequestEvent)
    assert (parsed.subject.number, parsed.subject.label) == (165432, "ciflow/oot")


def test_a_relayed_pull_request_is_the_event_inside_with_where_it_came_from() -> None:
    parsed = parse_delivery("repository_dispatch", _payload("repository_dispatch_pull_request.json"))
    direct = parse_delivery("pull_request", _payload("pull_request_labeled.json"))
    assert parsed.event == "pull_request"
    assert parsed.via == "repository_dispatch:pull_request"
    assert isinstance(parsed.subject, PullRequestEvent)
    assert parsed.subject.head_sha == direct.subject.head_sha  # type: ignore[union-attr]


def test_push_ping_and_unknown_events() -> None:
    push = parse_delivery("push", _payload("push_backend.json")).subject
    assert isinstance(push, PushEvent) and push.branch == "main"
    ping = parse_delivery("ping", _payload("ping.json")).subject
    assert isinstance(ping, Unrouted) and ping.reason.startswith("ping: ")
    other = parse_delivery("issues", _payload("issues_opened.json")).subject
    assert other == Unrouted("event 'issues' is recorded but not routed")


def test_a_dispatch_relaying_a_dispatch_is_not_unwrapped_again() -> None:
    inner = {"client_payload": {"event": "repository_dispatch", "payload": {}}}
    parsed = parse_delivery("repository_dispatch", inner)
    assert parsed.subject == Unrouted("a relayed repository_dispatch is not routed again")


def test_a_payload_missing_what_its_event_needs_is_refused() -> None:
    with pytest.raises(PayloadError, match="pull_request"):
        parse_delivery("pull_request", {"action": "labeled"})
    with pytest.raises(PayloadError, match="client_payload"):
        parse_delivery("repository_dispatch", {"action": "x"})
