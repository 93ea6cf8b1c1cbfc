"""The life of a PR run after the webhook: released when the PR's wheel is published,
expired when it never is, and its verdict owed to the PR's head sha as a commit status.

Takes a session and never commits: the caller owns the unit of work. Whether a wheel is
published is the caller's question (network I/O stays out of here).
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.commands import outbox
from service.domain.public_text import public_text
from service.models import Backend, OutboxKind, Run, RunState, utcnow

# PR runs are keyed "pr:<number>:<sha>:<backend id>" (service/github/pr_runs.py).
PR_KEY_PREFIX = "pr:"
STATUS_CONTEXT = "ootci"
# How far back finished PR runs are looked at for a status still owed.
STATUS_LOOKBACK = dt.timedelta(days=7)


def waiting_pr_runs(session: Session) -> list[Run]:
    return list(session.scalars(select(Run).where(Run.state == RunState.WAITING).order_by(Run.id)))


def wait_deadline(run: Run) -> dt.datetime | None:
    text = run.trigger_info.get("wait_until")
    return dt.datetime.fromisoformat(text) if isinstance(text, str) else None


def release(run: Run) -> None:
    """The PR's wheel is published: the run joins the queue like any other."""
    run.transition(RunState.QUEUED)
    run.error = None


def expire(run: Run, *, now: dt.datetime | None = None) -> None:
    """The PR's wheel never came: errored, with nothing tested under the PR's name."""
    started = run.created_at
    hours = ((now or utcnow()) - started).total_seconds() / 3600 if started else 0
    reason = (
        f"expired: waiting for upstream build of PR #{run.trigger_info.get('pr')}: no wheel at "
        f"{run.trigger_info.get('wheel_url')} after {hours:.1f} h; nothing was tested"
    )
    run.transition(RunState.ERRORED, now=now)
    run.error = reason
    run.verdict = "infra"
    run.verdict_reason = reason


def _status_of(run: Run) -> tuple[str, str]:
    """(GitHub status state, description) for the run as it stands."""
    state = RunState(run.state)
    version = run.torch_build.label if run.torch_build else "the PR's torch"
    if state is RunState.WAITING:
        return "pending", "waiting for the PR's torch build to be published"
    if state in RunState.ACTIVE:
        return "pending", "queued" if state is RunState.QUEUED else f"testing against {version}"
    if state is RunState.PASSED:
        return "success", f"passed against {version}"
    if state is RunState.FAILED:
        return "failure", (run.verdict_reason or f"failed against {version}")
    return "error", (run.error or "errored")


def run_link(public_url: str, run_id: int) -> str | None:
    """The run's page under OOTCI_PUBLIC_URL, the only base a published link has (None
    when unset: a status without a link rather than one to an internal address)."""
    return f"{public_url.rstrip('/')}/runs/{run_id}" if public_url else None


def enqueue_pr_statuses(
    session: Session, *, public_url: str, now: dt.datetime | None = None
) -> int:
    """Owe each recent PR run's current state to its PR head as a commit status (context
    ``ootci/<backend>``); a state already owed is not owed twice. Returns how many were new."""
    since = (now or utcnow()) - STATUS_LOOKBACK
    rows = session.execute(
        select(Run, Backend.name)
        .join(Backend, Backend.id == Run.backend_id)
        .where(Run.dedupe_key.like(f"{PR_KEY_PREFIX}%"), Run.created_at >= since)
        .order_by(Run.id)
    ).all()
    added = 0
    for run, backend in rows:
        sha = run.trigger_info.get("sha")
        if not isinstance(sha, str):
            continue
        state, description = _status_of(run)
        context = f"{STATUS_CONTEXT}/{backend}"
        link = run_link(public_url, run.id)
        added += outbox.enqueue(
            session,
            kind=OutboxKind.STATUS,
            target=f"{sha}:{context}",
            dedupe_key=f"status:run:{run.id}:{run.state}",
            payload={
                "sha": sha,
                "state": state,
                "context": context,
                # Published on the PR: the worker's paths and internal hosts stay inside.
                "description": public_text(description, public_url),
                "target_url": link,
                "run_id": run.id,
            },
        )
    return added
