"""Celery tasks: stable names ``ootci.<area>.<verb>``, JSON ids in, idempotent.

Thin on purpose: each opens the process's engine and calls a function that also runs
without Celery: a run's pipeline (``workers/pipeline/``; the embedded mode calls
``execute_run`` directly) or a scheduled job's body (``workers/jobs/``). When each
scheduled task fires is ``schedule.py``'s.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
from dataclasses import asdict
from typing import Any

from celery import Task
from sqlalchemy import Engine, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from service.commands.runs import plan_rerun, stale_run_ids
from service.config import get_settings
from service.db import get_engine, session_factory, session_scope
from service.github.client import GitHubClient
from service.github.reporter import drain_with_settings
from service.github.vendor_status import drain as drain_vendor_statuses
from service.models import Run, RunState
from service.notify.drain import drain as drain_notify
from workers.celery_app import app
from workers.jobs.bisect import advance
from workers.jobs.nightly import plan_nightly
from workers.jobs.pin_reports import make_weekly_reports
from workers.jobs.pr_wait import check_waiting
from workers.jobs.verify import pending as verify_pending
from workers.jobs.verify import verify_breakage
from workers.pipeline.env.resolve import nightly_dates
from workers.pipeline.execute import execute_run
from workers.pipeline.testrun.shards import execute_shard
from workers.schedule import QUEUED_STALE_AFTER_S

log = logging.getLogger(__name__)

MAX_DB_RETRIES = 3
# A ceiling on redeliveries of one run's task whatever the reason, so that no clock skew
# can make a message chase a retry time or a lease forever; the sweeper picks such a run
# up later.
MAX_REDELIVERIES = 50

# A database that cannot be reached is retried with backoff and leaves the run queued (or
# leased: then the lease and the sweeper bring it back). Infrastructure failures inside
# the pipeline (pip, network, disk) are retried too, with the budget and backoff kept on
# the run itself (settings.infra_retries, runs.retry_at) so that they survive a worker
# restart. Anything else is recorded on the run by execute_run and not retried.
RETRYABLE = (OperationalError,)

# The nightly matrix is queued all at once, every backend x target; the loop's next steps
# (rank a breakage's culprits, verify them, label, advance a bisection) are queued as a run
# ends and must not wait behind the rest of the night (issue #31: the label is due within
# 5 min of the breaking verdict). On Redis, kombu serves priority 0 first and a message
# without a priority is 0, so the matrix's runs go last instead. (An AMQP queue declared
# without x-max-priority ignores it: plain FIFO, as before.)
NIGHTLY_RUN_PRIORITY = 9


def _engine() -> Engine:
    return get_engine(get_settings().resolved_database_url)


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _claimable_in(run_id: int) -> float | None:
    """Seconds until a run this worker could not claim may be claimed: a queued run's retry
    time, a running run's lease. None when it is finished or gone (nothing left to do)."""
    with Session(_engine()) as s:
        row = s.execute(
            select(Run.state, Run.retry_at, Run.lease_expires_at).where(Run.id == run_id)
        ).one_or_none()
    if row is None or RunState(row.state).finished:
        return None
    when: dt.datetime | None = row.retry_at if row.state == RunState.QUEUED else row.lease_expires_at
    if when is None:
        return 0.0
    return max(0.0, (when - dt.datetime.now(dt.UTC)).total_seconds())


@app.task(  # type: ignore[untyped-decorator]
    name="ootci.run.execute",
    bind=True,
    autoretry_for=RETRYABLE,
    max_retries=MAX_DB_RETRIES,
    retry_backoff=60,
    retry_backoff_max=1800,
    retry_jitter=True,
)
def execute(self: Task, run_id: int) -> str | None:
    """Run it if it is claimable; if it will be later, deliver this task again then.
    Returns the final state, or None when the run had finished already."""
    state = execute_run(_engine(), get_settings(), run_id, worker_id(), retry_infra=True,
                        dispatch_shards=dispatch_shards)
    if state in (RunState.QUEUED, None):
        # Not finished and not ours now: requeued after an infrastructure failure, or
        # leased by a worker that may have died (a broker redelivers an unacked message
        # after its visibility timeout, which can come before the lease, renewed while
        # the run made progress, runs out). Keep the message: deliver it again when the
        # run becomes claimable. A live owner finishes first and the redelivery finds a
        # finished run.
        countdown = _claimable_in(run_id)
        if countdown is not None:
            log.warning("run %s: not claimable yet, trying again in %.0f s", run_id, countdown)
            raise self.retry(countdown=countdown + 1, max_retries=MAX_REDELIVERIES)
    log.info("run %s: %s", run_id, state or "finished already")
    if state is not None:
        # What the run queued for GitHub (an analysis, a refreshed PR comment) goes out
        # now rather than at the next periodic drain.
        drain_outbox.apply_async()
        # A probe that finished moves its bisection on; a run that opened one starts it.
        advance_bisections.apply_async()
        drain_notifications.apply_async()
    return state


@app.task(  # type: ignore[untyped-decorator]
    name="ootci.run.test_shard",
    autoretry_for=RETRYABLE,
    max_retries=MAX_DB_RETRIES,
    retry_backoff=10,
    retry_jitter=True,
)
def test_shard(run_id: int, index: int) -> bool | None:
    """Run one shard of a run's test step against the run's build (testrun/shards.py). None: not
    ours to run (done, held by a live worker, or the run is over); the run's owner takes
    over any shard whose worker died, so nothing here is retried beyond the database."""
    return execute_shard(_engine(), get_settings(), run_id, index, worker_id())


def dispatch_shards(run_id: int, indexes: list[int]) -> None:
    for index in indexes:
        test_shard.apply_async(args=[run_id, index])


def dispatch(run_ids: list[int], *, priority: int | None = None) -> None:
    for run_id in run_ids:
        execute.apply_async(args=[run_id], priority=priority)


@app.task(name="ootci.nightly.schedule")  # type: ignore[untyped-decorator]
def nightly_schedule(night: str | None = None) -> list[int]:
    """Queue tonight's matrix (``night`` = ISO date, default today in UTC)."""
    day = dt.date.fromisoformat(night) if night else dt.datetime.now(dt.UTC).date()
    with session_scope(_engine()) as session:
        run_ids = plan_nightly(session, get_settings().pins, day)
    dispatch(run_ids, priority=NIGHTLY_RUN_PRIORITY)
    log.info("nightly %s: queued %d run(s)", day, len(run_ids))
    return run_ids


@app.task(name="ootci.bisect.advance")  # type: ignore[untyped-decorator]
def advance_bisections() -> list[int]:
    """Record the bisection probes that finished, queue the next ones (then dispatch them)
    and rank the ranges that got narrowed. Two at once cannot queue a probe twice: the
    row lock on each bisection serialises them (Postgres; SQLite has one writer)."""
    settings = get_settings()
    with session_scope(_engine()) as session:
        run_ids = advance(session, lambda: nightly_dates(settings.nightly_index_url))
    dispatch(run_ids)
    if run_ids:
        drain_outbox.apply_async()
    return run_ids


@app.task(name="ootci.classify.rerun")  # type: ignore[untyped-decorator]
def rerun(run_id: int) -> int | None:
    with session_scope(_engine()) as session:
        new_id = plan_rerun(session, run_id)
    if new_id is not None:
        dispatch([new_id])
    return new_id


@app.task(name="ootci.sweep.stale")  # type: ignore[untyped-decorator]
def sweep_stale() -> list[int]:
    """Send again the runs that lost their message or their worker."""
    with Session(_engine()) as session:
        run_ids = stale_run_ids(session, queued_older_than_s=QUEUED_STALE_AFTER_S)
    dispatch(run_ids)
    if run_ids:
        log.warning("re-dispatched stale runs %s", run_ids)
    return run_ids


@app.task(name="ootci.github.drain_outbox")  # type: ignore[untyped-decorator]
def drain_outbox() -> dict[str, Any]:
    """Send what ootci owes GitHub (analyses, PR reports, statuses); what cannot go out now
    stays queued with a backoff. Two drains at once skip each other's messages (row locks)."""
    settings = get_settings()
    result = drain_with_settings(settings, session_factory(_engine()))
    if result.errors:
        log.warning("outbox: %s", "; ".join(result.errors[:3]))
    if settings.culprit_verify_top > 0:
        # Ranked by this drain, not verified yet: undo the top suspects (issue #29).
        with session_scope(_engine()) as session:
            for breakage_id, red_run_id in verify_pending(session):
                verify_culprits.apply_async((breakage_id, red_run_id))
    return asdict(result)


@app.task(name="ootci.culprit.verify")  # type: ignore[untyped-decorator]
def verify_culprits(breakage_id: int, red_run_id: int) -> list[dict[str, Any]]:
    """Verify a breakage's top suspects by undoing each on the red run's torch (one run
    each, executed here), then send the report their answers changed."""
    settings = get_settings()
    engine = _engine()
    done = verify_breakage(session_factory(engine), settings, breakage_id, red_run_id,
                           GitHubClient.from_settings(settings),
                           lambda run_id: execute_run(engine, settings, run_id, worker_id()))
    drain_with_settings(settings, session_factory(engine))
    return [{"sha": v.sha, **v.to_dict()} for v in done]


@app.task(name="ootci.notify.drain")  # type: ignore[untyped-decorator]
def drain_notifications() -> dict[str, Any]:
    """Send the due notifications (webhooks, email, chat, the daily digests); a receiver
    that is down gets its message later, with a backoff."""
    settings = get_settings()
    sessions = session_factory(_engine())
    sent = asdict(drain_notify(sessions, settings))
    vendor = drain_vendor_statuses(sessions, GitHubClient.from_settings(settings),
                                   can_write=bool(settings.github_token.get_secret_value()))
    return {**sent, "vendor_statuses": asdict(vendor)}


@app.task(name="ootci.pr.check_waiting")  # type: ignore[untyped-decorator]
def check_waiting_pr_runs() -> dict[str, list[int]]:
    """Release the PR runs whose upstream wheel is published (then dispatch them), expire
    those past their deadline."""
    settings = get_settings()
    result = check_waiting(get_engine(settings.resolved_database_url), settings)
    dispatch(result.released)
    return {"released": result.released, "expired": result.expired}


@app.task(name="ootci.weekly.pin_reports")  # type: ignore[untyped-decorator]
def weekly_pin_reports() -> list[dict[str, object]]:
    """This week's stored pin report per backend, and the bump PRs they owe (sent by the
    outbox drain)."""
    settings = get_settings()
    made = make_weekly_reports(get_engine(settings.resolved_database_url), settings)
    return [{"backend": m.backend, "action": m.action, "reason": m.reason} for m in made]
