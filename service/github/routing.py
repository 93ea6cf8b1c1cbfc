"""What a verified GitHub delivery means for ootci: which runs to queue, or why none.

Decisions over the parsed delivery (``events.parse_delivery``, once per delivery), the
settings and the registered backends; ``service/api/webhooks.py`` records the delivery and
creates the runs in one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.commands.runs import RunRequestSpec
from service.config import Settings
from service.domain.admission import refusal
from service.domain.targets import nightly_targets
from service.domain.torch_spec import TorchSpecError, parse_spec
from service.github.events import (
    ParsedDelivery,
    PayloadError,
    PullRequestEvent,
    PushEvent,
    Unrouted,
)
from service.github.pr_runs import plan_pr_runs
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


def pre_route(settings: Settings, delivery: ParsedDelivery) -> Decision | None:
    """The decision when it needs no database (most of GitHub's traffic is not for us),
    else None: then ``route`` decides."""
    subject = delivery.subject
    if isinstance(subject, Unrouted):
        return Decision(RECORDED, subject.reason)
    if isinstance(subject, PullRequestEvent):
        return _pull_request_without_db(settings, subject)
    return _push_without_db(settings, subject)


def route(
    session: Session, settings: Settings, delivery: ParsedDelivery, *, delivery_id: str
) -> Decision:
    decided = pre_route(settings, delivery)
    if decided is not None:
        return decided
    info: dict[str, Any] = {"delivery": delivery_id, "event": delivery.event}
    if delivery.via:
        info["via"] = delivery.via
    subject = delivery.subject
    if isinstance(subject, PullRequestEvent):
        return _pull_request(session, settings, subject, info)
    assert isinstance(subject, PushEvent)  # pre_route decided every Unrouted
    return _push(session, settings, subject, info)


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
    backends = _backends(session)
    if not backends:
        return Decision(RECORDED, "no backends are registered yet")
    plan = plan_pr_runs(session, settings, pr, backends, info)
    return Decision(QUEUED if plan.runs else RECORDED, f"{plan.reason} ({pr.action})", plan.runs)


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
    # Only registered backends rebuild on a push: a CLI experiment from a clone does not.
    watching = [
        b for b in _backends(session) if b.nightly and _same_repo(b.source, push.repo_urls)
    ]
    if not watching:
        return Decision(IGNORED, f"push to {push.repo}: neither upstream nor a registered backend")
    rebuild = [b for b in watching if b.ref is None or b.ref == push.branch]
    if not rebuild:
        return Decision(IGNORED, f"push to {push.ref}: the backends track other branches")
    # The same targets as the nightly: a vendor's push is tested where its next night will be.
    targets = nightly_targets(settings.pins)
    runs = [
        RunRequestSpec(b, spec, push_info, backend_sha=push.after)
        for b in rebuild
        for spec in targets
    ]
    names = ", ".join(b.name for b in rebuild)
    return Decision(
        QUEUED,
        f"backend push {push.after[:12]}: rebuild {names} against {', '.join(targets)}",
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
    if spec is not None and not _callers_may_run(settings, spec):
        return Decision(
            RECORDED,
            f"upstream {push.after[:12]} matches a torch build from a CLI-only spec ({spec}); "
            "a webhook does not run it (OOTCI_API_ALLOW_ANY_TORCH_SPEC)",
        )
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


def _callers_may_run(settings: Settings, spec_text: str) -> bool:
    """Webhook runs get what API callers get (service/domain/admission.py): a torch build
    a CLI user made from a path: tree or a wheel URL is not for a delivery to run again."""
    try:
        spec = parse_spec(
            spec_text,
            nightly_index_url=settings.nightly_index_url,
            pip_index_url=settings.pip_index_url,
        )
    except TorchSpecError:
        return False
    return refusal(spec, settings.caller_policy) is None


def _normalise(url: str) -> str:
    url = url.strip().lower().removesuffix("/").removesuffix(".git")
    for prefix in ("git@github.com:", "ssh://git@github.com/", "git://github.com/"):
        if url.startswith(prefix):
            url = "https://github.com/" + url[len(prefix) :]
    return url.replace("https://api.github.com/repos/", "https://github.com/")


def _same_repo(source: str, urls: tuple[str, ...]) -> bool:
    return _normalise(source) in {_normalise(u) for u in urls}


__all__ = ["Decision", "PayloadError", "pre_route", "route"]
