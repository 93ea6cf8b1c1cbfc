"""Commit statuses on a vendor's own pushed commits: a push to a registered backend's
repository rebuilds it, and the vendor sees the verdict on that commit, in their repository,
per torch target (``ootci/<spec>``). Queued by the collect step and the run's end
(``service/commands/notifications.py:vendor_status``), sent here with the outbox's backoff;
a repository the token cannot write to is a failed message, kept with GitHub's reason."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from service.commands import outbox
from service.github.client import GitHubClient
from service.github.errors import GitHubConfigError, GitHubError, GitHubUnavailable
from service.models import OutboxKind

log = logging.getLogger(__name__)
KINDS = frozenset({OutboxKind.VENDOR_STATUS})


@dataclass
class VendorStatusResult:
    sent: int = 0
    retried: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


def drain(
    sessions: Callable[[], Session], github: GitHubClient, *, can_write: bool, limit: int = 100,
    now: dt.datetime | None = None,
) -> VendorStatusResult:
    """Post the due statuses; ``now`` judges "due" (a test looks past a backoff)."""
    result = VendorStatusResult()
    for _ in range(limit):
        with sessions() as session:
            found = outbox.due(session, limit=1, kinds=KINDS, now=now)
            if not found:
                break
            message = found[0]
            p = message.payload
            if not can_write:
                outbox.mark_dry_run(message, dict(p))
                session.commit()
                continue
            try:
                status_id = github.set_status(p["sha"], p["state"], p["context"],
                                              p["description"], p.get("target_url"),
                                              repo=p["repo"])
            except (GitHubUnavailable, GitHubConfigError) as exc:
                outbox.mark_retry(message, str(exc))
                result.retried += 1
                result.errors.append(str(exc))
            except GitHubError as exc:
                outbox.mark_failed(message, " ".join(str(exc).split()))
                result.failed += 1
                result.errors.append(str(exc))
            else:
                outbox.mark_sent(message, {"status_id": status_id})
                result.sent += 1
            session.commit()
    return result
