"""What makes two webhook deliveries the same event, beyond GitHub's delivery id.

A replay of a signed body under a new ``X-GitHub-Delivery`` (or GitHub's own redelivery
of a relayed copy) must not queue the runs again: deliveries that would queue runs carry a
key of (event, repository, PR, head sha, label), or (event, repository, ref, sha) for a
push, and the database keeps one delivery per key (a unique index, so concurrent copies
race safely). Separately, a run is not queued while an identical one is queued or running.
"""

from __future__ import annotations

import hashlib

from sqlalchemy.orm import Session

from service.commands.runs import RunRequestSpec
from service.github.events import ParsedDelivery, PullRequestEvent, PushEvent
from service.queries.runs import active_run_keys


def content_key(delivery: ParsedDelivery, trigger_label: str) -> str | None:
    """The key of what a delivery is about (a hash, 64 hex characters), or None for an
    event that queues nothing. A relayed event has the key of the direct one."""
    subject = delivery.subject
    if isinstance(subject, PullRequestEvent):
        label = subject.label if subject.action == "labeled" else trigger_label
        parts = ["pull_request", subject.repo.lower(), str(subject.number), subject.head_sha,
                 label or ""]
    elif isinstance(subject, PushEvent):
        parts = ["push", subject.repo.lower(), subject.ref, subject.after]
    else:
        return None
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def run_key(spec: RunRequestSpec) -> tuple[int, str, str | None, str | None]:
    """What makes two runs identical: backend, torch spec, backend sha, and the upstream
    commit the trigger is about (a PR's head or a push)."""
    sha = spec.trigger_info.get("sha")
    return (spec.backend.id, spec.torch_spec, spec.backend_sha,
            sha if isinstance(sha, str) else None)


def without_active_twins(
    session: Session, runs: list[RunRequestSpec]
) -> tuple[list[RunRequestSpec], list[int]]:
    """``runs`` minus those identical to a run already queued or running, and the ids of
    those active runs."""
    if not runs:
        return runs, []
    active = active_run_keys(session, {spec.backend.id for spec in runs})
    fresh = [spec for spec in runs if run_key(spec) not in active]
    twins = sorted({active[run_key(spec)] for spec in runs if run_key(spec) in active})
    return fresh, twins
