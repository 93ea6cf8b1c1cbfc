"""Handing runs the HTTP edge committed to the dispatcher."""

from __future__ import annotations

import logging

from service.api.deps import AppContext

log = logging.getLogger(__name__)


def enqueue_committed(ctx: AppContext, run_ids: list[int]) -> None:
    """Hand committed runs to the dispatcher. A failed publish is logged, not raised: the
    row is committed and queued, and the stale-run sweeper dispatches it again."""
    for run_id in run_ids:
        try:
            ctx.dispatcher.enqueue_run(run_id)
        except Exception:
            log.exception("could not enqueue run %s; the sweeper will retry", run_id)
