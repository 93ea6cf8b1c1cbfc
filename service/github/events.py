"""Typed views of the GitHub webhook payloads ootci routes.

Only the fields ootci uses are read, from GitHub's documented shapes ("Webhook events and
payloads"): ``pull_request`` (action, number, label, pull_request.head.sha/html_url/labels,
repository.full_name) and ``push`` (ref, before, after, deleted, repository URLs).
``repository_dispatch`` carries another event inside ``client_payload``; PyTorch's
cross-repository CI relay forwards upstream pull_request/push events that way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class PayloadError(ValueError):
    """A signed payload that lacks what its event type must have."""


def _obj(payload: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = payload.get(key)
    if not isinstance(value, Mapping):
        raise PayloadError(f"payload has no {key!r} object")
    return value


def _str(payload: Mapping[str, Any], key: str) -> str:
    value = payload.get(key)
    if not isinstance(value, str):
        raise PayloadError(f"payload has no {key!r} string")
    return value


_SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")  # SHA-1, or SHA-256 repositories


def _sha(payload: Mapping[str, Any], key: str) -> str:
    value = _str(payload, key)
    if not _SHA.fullmatch(value):
        raise PayloadError(f"{key!r} is not a commit sha")
    return value


def _repo_name(payload: Mapping[str, Any]) -> str:
    return _str(_obj(payload, "repository"), "full_name")


def _pr_repo(payload: Mapping[str, Any], pr: Mapping[str, Any]) -> str:
    """The repository the PR targets; a relayed PR may carry it only as ``base.repo``."""
    if isinstance(payload.get("repository"), Mapping):
        return _repo_name(payload)
    return _str(_obj(_obj(pr, "base"), "repo"), "full_name")


@dataclass(frozen=True)
class PullRequestEvent:
    action: str
    repo: str
    number: int
    head_sha: str
    url: str
    title: str
    label: str | None  # the label just added/removed (labeled/unlabeled actions)
    labels: tuple[str, ...]  # every label the PR carries now
    # The PR's own torch wheel, when a relay sends it (``client_payload.wheel_url``).
    wheel_url: str = ""
    # Its sha256 when the relay says it (``client_payload.wheel_sha256``): the worker refuses
    # other bytes.
    wheel_sha256: str = ""

    @classmethod
    def parse(cls, payload: Mapping[str, Any]) -> PullRequestEvent:
        pr = _obj(payload, "pull_request")
        number = payload.get("number", pr.get("number"))
        if not isinstance(number, int):
            raise PayloadError("payload has no pull request number")
        label = payload.get("label")
        return cls(
            action=_str(payload, "action"),
            repo=_pr_repo(payload, pr),
            number=number,
            head_sha=_sha(_obj(pr, "head"), "sha"),
            url=str(pr.get("html_url") or ""),
            title=str(pr.get("title") or ""),
            label=str(label["name"]) if isinstance(label, Mapping) and "name" in label else None,
            labels=tuple(
                str(item["name"])
                for item in pr.get("labels") or ()
                if isinstance(item, Mapping) and "name" in item
            ),
            wheel_url=_wheel_url(payload),
            wheel_sha256=_wheel_sha256(payload),
        )


def _wheel_url(payload: Mapping[str, Any]) -> str:
    value = payload.get("wheel_url")
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or not re.fullmatch(r"https?://\S+\.whl", value):
        raise PayloadError("'wheel_url' is not an http(s) URL of a .whl file")
    return value


def _wheel_sha256(payload: Mapping[str, Any]) -> str:
    value = payload.get("wheel_sha256")
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", value):
        raise PayloadError("'wheel_sha256' is not a sha256 (64 hex digits)")
    return value.lower()


ZERO_SHA = "0" * 40


@dataclass(frozen=True)
class PushEvent:
    repo: str
    ref: str
    before: str
    after: str
    deleted: bool
    repo_urls: tuple[str, ...]  # every URL the repository is known by, for matching sources
    compare: str

    @property
    def branch(self) -> str | None:
        return self.ref.removeprefix("refs/heads/") if self.ref.startswith("refs/heads/") else None

    @classmethod
    def parse(cls, payload: Mapping[str, Any]) -> PushEvent:
        repo = _obj(payload, "repository")
        after = _sha(payload, "after")
        urls = tuple(
            str(repo[key])
            for key in ("clone_url", "html_url", "ssh_url", "git_url", "url")
            if isinstance(repo.get(key), str)
        )
        return cls(
            repo=_str(repo, "full_name"),
            ref=_str(payload, "ref"),
            before=str(payload.get("before") or ""),
            after=after,
            deleted=bool(payload.get("deleted")) or after == ZERO_SHA,
            repo_urls=urls,
            compare=str(payload.get("compare") or ""),
        )


def unwrap_repository_dispatch(payload: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """The event a ``repository_dispatch`` relays: ``(event name, its payload)``.

    Accepted shapes of ``client_payload``: ``{"event": NAME, "payload": {...}}`` (an explicit
    envelope), or the relayed payload itself, recognised by its keys (``pull_request`` ->
    pull_request, ``ref`` + ``after`` -> push). The envelope's event name may also be the
    dispatch's ``action`` (its event_type)."""
    client = _obj(payload, "client_payload")
    inner = client.get("payload")
    if isinstance(inner, Mapping):
        name = client.get("event") or client.get("event_name") or payload.get("action")
        if not isinstance(name, str):
            raise PayloadError("client_payload.payload given without an event name")
        return name, _with_repository(inner, client)
    if isinstance(client.get("pull_request"), Mapping):
        return "pull_request", _with_repository(client, client)
    if "ref" in client and "after" in client:
        return "push", _with_repository(client, client)
    raise PayloadError("client_payload carries no pull_request or push event")


def _with_repository(inner: Mapping[str, Any], client: Mapping[str, Any]) -> Mapping[str, Any]:
    """Relays sometimes put the upstream repository beside the event instead of inside it."""
    for key in ("wheel_url", "wheel_sha256"):  # the PR's build, sent beside it
        if key in client and key not in inner:
            inner = {**inner, key: client[key]}
    if isinstance(inner.get("repository"), Mapping) or not isinstance(
        client.get("repository"), Mapping
    ):
        return inner
    return {**inner, "repository": client["repository"]}


@dataclass(frozen=True)
class Unrouted:
    """A delivery ootci records but does not route (a ping, an event it does not use)."""

    reason: str


@dataclass(frozen=True)
class ParsedDelivery:
    """A verified delivery, parsed once: what it is about, and whether it came relayed."""

    event: str  # the event routed: for a relayed one, the event inside the dispatch
    subject: PullRequestEvent | PushEvent | Unrouted
    via: str | None = None  # "repository_dispatch[:<action>]" when relayed


def parse_delivery(event: str, payload: Mapping[str, Any]) -> ParsedDelivery:
    """The typed view of a delivery of ``event``. Raises PayloadError when the payload lacks
    what its event must carry."""
    if event == "repository_dispatch":
        inner_event, inner = unwrap_repository_dispatch(payload)
        if inner_event == "repository_dispatch":
            return ParsedDelivery(event, Unrouted("a relayed repository_dispatch is not routed again"))
        action = payload.get("action")
        via = f"repository_dispatch:{action}" if action else "repository_dispatch"
        return ParsedDelivery(inner_event, _subject(inner_event, inner), via)
    return ParsedDelivery(event, _subject(event, payload))


def _subject(event: str, payload: Mapping[str, Any]) -> PullRequestEvent | PushEvent | Unrouted:
    if event == "ping":
        return Unrouted(f"ping: {payload.get('zen', 'hello')}")
    if event == "pull_request":
        return PullRequestEvent.parse(payload)
    if event == "push":
        return PushEvent.parse(payload)
    return Unrouted(f"event {event!r} is recorded but not routed")
