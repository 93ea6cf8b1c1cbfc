"""Which runs an upstream PR's trigger makes: each backend against *that PR's* torch, or
none. Never the default torch under the PR's name.

The wheel comes from the relay's payload (``wheel_url``: the relay knows it is published,
so the runs are queued), or from ``OOTCI_PR_WHEEL_URL_TEMPLATE`` (where upstream publishes
PR builds; not known to exist yet, so the runs wait for it, see
``service/commands/pr_runs.py``). One run per (PR, head sha, backend): a repeated label or
a ``synchronize`` at the same sha queues nothing new.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import socket
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.commands.runs import RunRequestSpec
from service.config import Settings
from service.domain.torch_spec import TorchSpecError, parse_spec
from service.domain.wheel_url import IPAddress, address_refusal, url_refusal
from service.github.events import PullRequestEvent
from service.models import Backend, Run, utcnow

WAITING_PREFIX = "waiting for upstream build"


@dataclass(frozen=True)
class PrPlan:
    reason: str
    runs: list[RunRequestSpec] = field(default_factory=list)


def dedupe_key(pr: int, sha: str, backend_id: int) -> str:
    return f"pr:{pr}:{sha}:{backend_id}"


def _wheel_source(settings: Settings, pr: PullRequestEvent) -> tuple[str, str] | None:
    """(URL, where it came from) of the PR's torch wheel, or None when nothing says."""
    if pr.wheel_url:
        return pr.wheel_url, "relay"
    template = settings.pr_wheel_url_template
    if template:
        return template.replace("{sha}", pr.head_sha).replace("{pr}", str(pr.number)), "template"
    return None


def _addresses(host: str) -> list[IPAddress] | None:
    """What ``host`` resolves to now, or None when it does not resolve (yet)."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return None
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


def wheel_refusal(settings: Settings, url: str) -> str | None:
    """Why the worker would refuse to fetch ``url``, judged at the door so nothing is
    queued for it. A host that does not resolve yet passes here (a template's build may
    not be published); the worker resolves again and connects only to what it checked."""
    policy = settings.wheel_policy
    refused = url_refusal(url, policy)
    if refused is not None:
        return refused
    host = urllib.parse.urlsplit(url).hostname or ""
    addresses = _addresses(host)
    return None if addresses is None else address_refusal(host, addresses, policy)


def plan_pr_runs(
    session: Session,
    settings: Settings,
    pr: PullRequestEvent,
    backends: list[Backend],
    info: dict[str, Any],
    *,
    now: dt.datetime | None = None,
) -> PrPlan:
    source = _wheel_source(settings, pr)
    head = f"PR #{pr.number} ({pr.head_sha[:12]})"
    if source is None:
        return PrPlan(
            f"{head}: no wheel_url from the relay and no OOTCI_PR_WHEEL_URL_TEMPLATE: "
            "nothing queued (a PR is only tested against its own torch)"
        )
    url, origin = source
    spec = f"wheel:{url}"
    try:
        parse_spec(spec)
    except TorchSpecError as exc:
        return PrPlan(f"{head}: the PR's wheel URL is unusable: {exc}")
    refused = wheel_refusal(settings, url)
    if refused is not None:
        return PrPlan(f"{head}: the PR's wheel URL is refused, nothing queued: {refused}")
    keys = {b.id: dedupe_key(pr.number, pr.head_sha, b.id) for b in backends}
    existing = set(session.scalars(select(Run.dedupe_key).where(Run.dedupe_key.in_(keys.values()))))
    fresh = [b for b in backends if keys[b.id] not in existing]
    if not fresh:
        return PrPlan(f"{head}: every backend already has its run for this head sha")
    deadline = (now or utcnow()) + dt.timedelta(seconds=settings.pr_wheel_wait_s)
    pr_info = {
        **info,
        "pr": pr.number,
        "sha": pr.head_sha,
        "url": pr.url,
        "title": pr.title[:200],
        "wheel_url": url,
        "wheel_source": origin,
    }
    if pr.wheel_sha256 and origin == "relay":
        pr_info["wheel_sha256"] = pr.wheel_sha256
    waiting = None
    if origin == "template":
        # Nobody said the build exists yet: wait for it rather than fail on a 404.
        pr_info["wait_until"] = deadline.isoformat()
        waiting = f"{WAITING_PREFIX}: {url} (until {deadline:%Y-%m-%d %H:%M} UTC)"
    runs = [
        RunRequestSpec(b, spec, pr_info, waiting_for=waiting, dedupe_key=keys[b.id]) for b in fresh
    ]
    verb = "waiting for" if waiting else "against"
    return PrPlan(f"{head}: {len(runs)} run(s) {verb} the PR's own torch {url}", runs)
