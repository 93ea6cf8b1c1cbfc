"""PR runs waiting for their upstream build: check whether each PR's wheel is published
yet, release the run (then it is dispatched like any other) or expire it at its deadline,
and owe every PR run's state to its PR head as a commit status (sent by the outbox drain).

Runs without Celery too: the worker task in ``workers/tasks.py`` calls ``check_waiting``.
"""

from __future__ import annotations

import datetime as dt
import logging
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine

from service.commands.pr_runs import (
    enqueue_pr_statuses,
    expire,
    release,
    wait_deadline,
    waiting_pr_runs,
)
from service.config import Settings
from service.db import session_scope
from service.models import utcnow

log = logging.getLogger(__name__)
HEAD_TIMEOUT_S = 15


def is_published(url: str) -> bool:
    """True when ``url`` answers 2xx to HEAD (a local file: exists). A 404 is "not yet";
    other trouble is logged and also "not yet": the next check asks again."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "file":
        return Path(urllib.request.url2pathname(parts.path)).is_file()
    request = urllib.request.Request(url, method="HEAD")  # noqa: S310 (http(s) only: parsed upstream)
    try:
        with urllib.request.urlopen(request, timeout=HEAD_TIMEOUT_S) as resp:  # noqa: S310
            return bool(200 <= resp.status < 300)
    except urllib.error.HTTPError as exc:
        if exc.code not in (403, 404):
            log.warning("checking %s: HTTP %s", url, exc.code)
        return False
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        log.warning("checking %s: %s", url, exc)
        return False


@dataclass
class WaitCheck:
    released: list[int] = field(default_factory=list)
    expired: list[int] = field(default_factory=list)
    still_waiting: list[int] = field(default_factory=list)
    statuses_owed: int = 0


def check_waiting(
    engine: Engine,
    settings: Settings,
    *,
    published: Callable[[str], bool] = is_published,
    now: dt.datetime | None = None,
) -> WaitCheck:
    """One pass over the waiting runs; the caller dispatches ``released``."""
    result = WaitCheck()
    now = now or utcnow()
    with session_scope(engine) as session:
        for run in waiting_pr_runs(session):
            url = str(run.trigger_info.get("wheel_url") or "")
            if url and published(url):
                release(run)
                result.released.append(run.id)
                continue
            deadline = wait_deadline(run)
            if deadline is None or now >= deadline:
                expire(run, now=now)
                result.expired.append(run.id)
            else:
                result.still_waiting.append(run.id)
        result.statuses_owed = enqueue_pr_statuses(
            session, public_url=settings.public_url, now=now
        )
    if result.released or result.expired:
        log.info("PR runs: released %s, expired %s", result.released, result.expired)
    return result
