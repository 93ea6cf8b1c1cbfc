"""The embedded mode's sweep: what Celery's redelivery and beat's sweeper do for workers,
done by ``ootci serve`` (at start, then every ``Settings.embedded_sweep_s``) and by ``ootci
run`` (at start) for the processes of this host.

One sweep: end the runs of dead ``ootci run`` processes as errored infra (``ootci resume``
continues them), expire the leases of dead serving processes' runs, and hand every run
left queued or with an expired lease to the dispatcher (claiming makes a second hand-over
of one run a no-op, so it runs exactly once).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from service.dispatch import Dispatcher

log = logging.getLogger(__name__)


def this_host() -> str:
    return socket.gethostname()


def pid_alive(pid: int) -> bool:
    """True if ``pid`` is a live process (a zombie, killed and not yet reaped, is dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            # "pid (comm) S ...": the state follows the last ')' (comm may hold spaces).
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def process_started(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks after boot (/proc/PID/stat field 22); None when
    it cannot be read (no such process, no /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            # Fields after "(comm)": state is field 3, starttime field 22.
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def runner_alive(pid: int, started: int | None) -> bool:
    """True if ``pid`` is alive and is still the process that started at ``started``: the
    kernel reuses PIDs, and a recycled one must not keep a dead runner's runs open."""
    if not pid_alive(pid):
        return False
    now_started = process_started(pid)
    return started is None or now_started is None or now_started == started


@dataclass
class SweepReport:
    orphaned: list[int] = field(default_factory=list)
    expired: list[int] = field(default_factory=list)
    dispatched: list[int] = field(default_factory=list)


def sweep_once(
    engine: Engine, dispatcher: Dispatcher | None = None, *, queued_older_than_s: int = 0
) -> SweepReport:
    from service.commands.orphans import end_runs_of_dead_runners, expire_leases_of_dead_workers
    from service.commands.runs import stale_run_ids
    from service.db import session_scope

    report = SweepReport()
    host = this_host()
    with session_scope(engine) as s:
        report.orphaned = end_runs_of_dead_runners(s, host=host, is_alive=runner_alive)
        report.expired = expire_leases_of_dead_workers(s, host=host, is_alive=pid_alive)
    if dispatcher is not None:
        with session_scope(engine) as s:
            report.dispatched = stale_run_ids(s, queued_older_than_s=queued_older_than_s)
        for run_id in report.dispatched:
            dispatcher.enqueue_run(run_id)
    return report


class PeriodicSweeper:
    """``sweep_once`` every ``every_s`` on a daemon thread; a failed sweep (the database
    away) is logged and the next one tries again."""

    def __init__(self, engine: Engine, dispatcher: Dispatcher, every_s: float) -> None:
        self._engine = engine
        self._dispatcher = dispatcher
        self._every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ootci-sweeper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _loop(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                report = sweep_once(
                    self._engine, self._dispatcher, queued_older_than_s=int(self._every_s)
                )
            except Exception:
                log.exception("embedded sweep failed; retrying in %s s", self._every_s)
                continue
            if report.orphaned or report.expired or report.dispatched:
                log.warning(
                    "sweep: ended %s (dead ootci run), expired %s (dead server), dispatched %s",
                    report.orphaned, report.expired, report.dispatched,
                )
