"""Creating runs from the HTTP edge and handing them to the dispatcher after the commit."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from service.api.deps import AppContext
from service.models import Backend
from service.runs import create_run

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunRequestSpec:
    """One run to create: a backend against a torch spec, with why."""

    backend: Backend
    torch_spec: str
    trigger_info: dict[str, Any] = field(default_factory=dict)
    backend_sha: str | None = None


def create_runs(session: Session, requests: Iterable[RunRequestSpec], *, trigger: str) -> list[int]:
    """Add the rows (flushed, not committed: the caller's unit of work decides)."""
    return [
        create_run(
            session,
            r.backend,
            r.torch_spec,
            trigger=trigger,
            trigger_info=r.trigger_info,
            backend_sha=r.backend_sha,
        ).id
        for r in requests
    ]


def enqueue_committed(ctx: AppContext, run_ids: list[int]) -> None:
    """Hand committed runs to the dispatcher. A failed publish is logged, not raised: the
    row is committed and queued, and the stale-run sweeper dispatches it again."""
    for run_id in run_ids:
        try:
            ctx.dispatcher.enqueue_run(run_id)
        except Exception:
            log.exception("could not enqueue run %s; the sweeper will retry", run_id)
