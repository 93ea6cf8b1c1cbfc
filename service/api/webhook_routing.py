"""What a verified GitHub delivery means for ootci: which runs to queue, or why none.

Pure decisions over the payload, the settings and the registered backends; the router
records the delivery and creates the runs in one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.api.triggers import RunRequestSpec
from service.config import Settings
from service.github.events import (
    PayloadError,
    PullRequestEvent,
    PushEvent,
    unwrap_repository_dispatch,
)
from service.models import Backend, SourceKind, TorchBuild

QUEUED, RECORDED, IGNORED = "queued", "recorded", "ignored"
# pull_request actions that (re)run a PR already carrying the trigger label: new commits
# on a labelled PR are tested again, the way PyTorch's ciflow labels behave.
RERUN_ACTIONS = frozenset({"synchronize", "reopened"})


@dataclass(frozen=True)
class Decision:
    outcome: str  # queued | recorded | ignored
    reason: str
    runs: list[RunRequestSpec] = field(default_factory=list)


def pre_route(settings: Settings, event: str, payload: Mapping[str, Any]) -> Decision | None:
    """The decision when it needs no database (most of GitHub's traffic is not for us),
    else None: then ``route`` decides. Raises PayloadError like ``route``."""
    if event == "ping":
        return Decision(RECORDED, f"ping: {payload.get('zen', 'hello')}")
    if event == "pull_request":
        return _pull_request_without_db(settings, PullRequestEvent.parse(payload))
    if event == "push":
        return _push_without_db(settings, PushEvent.parse(payload))
    if event == "repository_dispatch":
        inner_event, inner = unwrap_repository_dispatch(payload)
        if inner_event == "repository_dispatch":
            return Decision(RECORDED, "a relayed repository_dispatch is not routed again")
        return pre_route(settings, inner_event, inner)
    return Decision(RECORDED, f"event {event!r} is recorded but not routed")


def route(
    session: Session,
    settings: Settings,
    event: str,
    payload: Mapping[str, Any],
    *,
    delivery: str,
    via: str | None = None,
) -> Decision:
    """Raises PayloadError when the payload lacks what its event must carry."""
    decided = pre_route(settings, event, payload)
    if decided is not None:
        return decided
    info: dict[str, Any] = {"delivery": delivery, "event": event}
    if via:
        info["via"] = via
    if event == "pull_request":
        return _pull_request(session, settings, PullRequestEvent.parse(payload), info)
    if event == "push":
        return _push(session, settings, PushEvent.parse(payload), info)
    # pre_route decided everything else but a relayed pull_request or push.
    inner_event, inner = unwrap_repository_dispatch(payload)
    action = payload.get("action")
    return route(
        session,
        settings,
        inner_event,
        inner,
        delivery=delivery,
        via=f"repository_dispatch:{action}" if action else "repository_dispatch",
    )


def _backends(session: Session) -> list[Backend]:
    return list(session.scalars(select(Backend).order_by(Backend.name)))


def _pull_request_without_db(settings: Settings, pr: PullRequestEvent) -> Decision | None:
    label = settings.trigger_label
    if pr.repo.lower() != settings.watched_upstream_repo.lower():
        return Decision(
            IGNORED, f"pull request on {pr.repo}, not on {settings.watched_upstream_repo}"
        )
    if pr.action == "labeled":
        if pr.label != label:
            return Decision(IGNORED, f"label {pr.label!r} is not the trigger label {label!r}")
    elif pr.action in RERUN_ACTIONS:
        if label not in pr.labels:
            return Decision(IGNORED, f"{pr.action} on a PR without the {label!r} label")
    else:
        return Decision(IGNORED, f"pull_request action {pr.action!r} does not trigger runs")
    return None


def _pull_request(
    session: Session, settings: Settings, pr: PullRequestEvent, info: dict[str, Any]
) -> Decision:
    label = settings.trigger_label
    backends = _backends(session)
    if not backends:
        return Decision(RECORDED, "no backends are registered yet")
    pr_info = {**info, "pr": pr.number, "sha": pr.head_sha, "url": pr.url, "title": pr.title[:200]}
    runs = [RunRequestSpec(b, settings.default_torch, pr_info) for b in backends]
    return Decision(
        QUEUED,
        f"PR #{pr.number} ({pr.head_sha[:12]}) {pr.action} with {label!r}: "
        f"{len(runs)} run(s) against {settings.default_torch}",
        runs,
    )


def _push_without_db(settings: Settings, push: PushEvent) -> Decision | None:
    if push.deleted:
        return Decision(IGNORED, f"{push.ref} was deleted")
    upstream = push.repo.lower() == settings.watched_upstream_repo.lower()
    if upstream and push.branch != settings.watched_upstream_branch:
        return Decision(IGNORED, f"push to {push.ref}, not {settings.watched_upstream_branch}")
    return None


def _push(session: Session, settings: Settings, push: PushEvent, info: dict[str, Any]) -> Decision:
    push_info = {
        **info,
        "repo": push.repo,
        "ref": push.ref,
        "sha": push.after,
        "compare": push.compare,
    }
    if push.repo.lower() == settings.watched_upstream_repo.lower():
        return _upstream_push(session, settings, push, push_info)
    watching = [b for b in _backends(session) if _same_repo(b.source, push.repo_urls)]
    if not watching:
        return Decision(IGNORED, f"push to {push.repo}: neither upstream nor a registered backend")
    rebuild = [b for b in watching if b.ref is None or b.ref == push.branch]
    if not rebuild:
        return Decision(IGNORED, f"push to {push.ref}: the backends track other branches")
    runs = [
        RunRequestSpec(b, pin, push_info, backend_sha=push.after)
        for b in rebuild
        for pin in settings.pins
    ]
    names = ", ".join(b.name for b in rebuild)
    return Decision(
        QUEUED,
        f"backend push {push.after[:12]}: rebuild {names} against {len(settings.pins)} pin(s)",
        runs,
    )


def _upstream_push(
    session: Session, settings: Settings, push: PushEvent, info: dict[str, Any]
) -> Decision:
    """A commit on upstream main is only testable once a torch build of it exists."""
    build = session.scalar(
        select(TorchBuild)
        .where(TorchBuild.git_version == push.after)
        .order_by(TorchBuild.created_at.desc())
        .limit(1)
    )
    spec = _installable_spec(build, settings) if build is not None else None
    if spec is None:
        return Decision(
            RECORDED,
            f"upstream {push.after[:12]} has no installable torch build yet (a commit is not "
            "installable); the nightly schedule tests it once a nightly contains it",
        )
    backends = _backends(session)
    if not backends:
        return Decision(RECORDED, "no backends are registered yet")
    runs = [RunRequestSpec(b, spec, info) for b in backends]
    return Decision(
        QUEUED, f"upstream {push.after[:12]} resolves to {spec}: {len(runs)} run(s)", runs
    )


def _installable_spec(build: TorchBuild, settings: Settings) -> str | None:
    """A spec that provisions exactly this build again. ``nightly`` would resolve to
    whatever is newest by then, so a nightly is pinned to its version on the nightly index
    (``pip:<req>@@<index>``); ``installed`` is whatever this machine has, so not that."""
    if build.source_kind == SourceKind.INSTALLED:
        return None
    if build.source_kind == SourceKind.NIGHTLY:
        return f"pip:torch=={build.version}@@{settings.nightly_index_url}"
    return build.spec


def _normalise(url: str) -> str:
    url = url.strip().lower().removesuffix("/").removesuffix(".git")
    for prefix in ("git@github.com:", "ssh://git@github.com/", "git://github.com/"):
        if url.startswith(prefix):
            url = "https://github.com/" + url[len(prefix) :]
    return url.replace("https://api.github.com/repos/", "https://github.com/")


def _same_repo(source: str, urls: tuple[str, ...]) -> bool:
    return _normalise(source) in {_normalise(u) for u in urls}


__all__ = ["Decision", "PayloadError", "pre_route", "route"]
