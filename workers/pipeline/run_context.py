"""What every step of one run attempt shares, apart from what the steps do (``execute.py``).

The run's context: its worker, settings and dir, the environment and secret masking of
every child it starts, and its database writes, each retried through an outage of up to
``Settings.db_outage_tolerance_s`` (:meth:`RunContext.write`). The lease: a heartbeat
thread renews it on its own timer (:class:`Heartbeat`); once another worker has taken the
run over, the next step boundary raises :class:`LeaseLost` and nothing more is written.
The steps' rows: :meth:`RunContext.step` commits a step's row when it starts (with the path
its log streams to) and again when it ends (with the log stored compressed), so a run
killed at any point keeps everything it had and stays re-claimable once its lease expires.
The run's end: :meth:`RunContext.finish` and :meth:`RunContext.requeue_for_retry` store
the error's kind (``runs.error_kind``) with it.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session

from service.commands.log_chunks import drop_log_chunks
from service.commands.runs import renew_lease, requeue_for_retry, retry_delay_s
from service.config import Settings
from service.db import session_scope
from service.domain.verdict import ErrorKind
from service.models import Run, RunState, Step, StepName, StepStatus, utcnow
from workers.pipeline.cache.layout import run_dir as run_dir_of
from workers.pipeline.cache.layout import stamp
from workers.pipeline.errors import PipelineError
from workers.pipeline.isolation.child_env import ChildEnvPolicy
from workers.pipeline.logs.masking import masker_for_settings
from workers.pipeline.logs.sink import LogSink
from workers.pipeline.logs.stream import LogStream
from workers.pipeline.steps.outcome import StepOutcome
from workers.pipeline.testrun.shards import ShardDispatch
from workers.pipeline.verdict.collect import notify_run_errored

log = logging.getLogger(__name__)

LEASE_RENEW_EVERY_S = 30.0
_DB_RETRY_EVERY_S = 1.0


@dataclass(frozen=True)
class RunEvent:
    """Progress of a run, for CLI progress bars and logs. kind: step | line | done."""

    run_id: int
    kind: str
    step: str
    status: str = ""
    text: str = ""


EventSink = Callable[[RunEvent], None]


def ignore_events(_event: RunEvent) -> None:
    pass


class LeaseLost(Exception):
    """Another worker took the run over (our lease expired): stop without writing more."""


def infra_reason(exc: BaseException) -> str | None:
    """Why ``exc`` is the machine's fault rather than the backend's or the user's (so the
    attempt is retried), or None."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"disk full: {exc}"
    if isinstance(exc, OperationalError) or (
        isinstance(exc, DBAPIError) and exc.connection_invalidated
    ):
        first = str(exc.orig or exc).strip().splitlines()
        return f"database unreachable: {first[0] if first else type(exc).__name__}"
    return None


class Heartbeat:
    """Renews the run's lease on its own timer, apart from the log: a step that prints
    nothing for an hour keeps its lease, and a database outage only costs missed beats (the
    lease outlives them). Sets ``lost`` when the run is no longer ours."""

    def __init__(self, engine: Engine, run_id: int, worker_id: str, lease_s: int) -> None:
        self._engine = engine
        self._run_id = run_id
        self._worker_id = worker_id
        self._lease_s = lease_s
        self.every_s = min(LEASE_RENEW_EVERY_S, lease_s / 4)
        self.lost = threading.Event()
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"lease-{run_id}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def beat(self) -> None:
        try:
            with session_scope(self._engine) as s:
                if not renew_lease(s, self._run_id, self._worker_id, self._lease_s):
                    self.lost.set()
            self.last_error = None
        except Exception as exc:
            # Keep beating: the database may be back before the lease runs out.
            self.last_error = infra_reason(exc) or repr(exc)
            log.warning("run %s: cannot renew the lease: %s", self._run_id, self.last_error)

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s) and not self.lost.is_set():
            self.beat()

    def abort_reason(self) -> str | None:
        return "the run's lease was lost to another worker" if self.lost.is_set() else None


class RunContext:
    """What every step of one run attempt shares: the run, its worker and settings, its
    dir, the child environment and masking policy, the lease's heartbeat, and the writes
    that wait out a database outage."""

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        run_id: int,
        worker_id: str,
        on_event: EventSink,
        only_tests: list[str] | None,
        attempt: int = 1,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.run_id = run_id
        self.worker_id = worker_id
        self.on_event = on_event
        self.run_dir = run_dir_of(settings.resolved_work_dir, run_id)
        # Every child of this run starts from this environment (HOME and TMPDIR in the run
        # dir, only the allowed variables), and every log line is masked.
        self.child_policy = ChildEnvPolicy.for_run(settings, self.run_dir)
        self.masker = masker_for_settings(settings)
        self.only_tests = only_tests  # a rerun's failed tests; None = the whole suite
        self.attempt = attempt
        self.heartbeat = Heartbeat(engine, run_id, worker_id, settings.run_lease_s)
        self.db_tolerance_s = float(settings.db_outage_tolerance_s)
        # Sends the test shards of a large suite to other workers (testrun/shards.py); None: the
        # test step stays on this worker (embedded mode, or no broker).
        self.dispatch_shards: ShardDispatch | None = None

    def log_name(self, name: StepName) -> str:
        """Each attempt its own log: a retry never appends to (nor classifies) an earlier one."""
        return f"{name.value}.log" if self.attempt <= 1 else f"{name.value}.attempt{self.attempt}.log"

    def check_lease(self) -> None:
        if self.heartbeat.lost.is_set():
            raise LeaseLost()

    def write(self, change: Callable[[Session], None]) -> None:
        """Commit ``change``, waiting out a database outage (up to ``db_tolerance_s``)."""
        deadline = time.monotonic() + self.db_tolerance_s
        while True:
            try:
                with session_scope(self.engine) as s:
                    change(s)
                return
            except (OperationalError, DBAPIError) as exc:
                reason = infra_reason(exc)
                if reason is None or time.monotonic() >= deadline:
                    raise
                log.warning("run %s: %s; retrying", self.run_id, reason)
                time.sleep(_DB_RETRY_EVERY_S)

    @contextmanager
    def step(self, name: StepName) -> Iterator[tuple[LogSink, list[StepOutcome]]]:
        """Open a step: a committed row + a streaming log; the caller appends its outcome.
        The row is closed whatever happens inside (a full disk, a database outage)."""
        self.check_lease()
        stamp(self.run_dir)  # in use: the cache GC leaves it alone for a day at least
        log_path = self.run_dir / self.log_name(name)
        started = utcnow()
        step_ids: list[int] = []

        def open_row(s: Session) -> None:
            row = Step(
                run_id=self.run_id,
                attempt=self.attempt,
                name=name,
                status=StepStatus.RUNNING,
                started_at=started,
                log_path=str(log_path),
            )
            s.add(row)
            s.flush()
            step_ids[:] = [row.id]

        self.write(open_row)
        self._emit(RunEvent(self.run_id, "step", name.value, StepStatus.RUNNING))

        def on_line(line: str) -> None:
            self._emit(RunEvent(self.run_id, "line", name.value, text=line))

        # What the sink writes is also streamed to the database: readers on other machines.
        stream = LogStream(self.engine, step_ids[0])
        sink = LogSink(log_path, on_line=on_line, masker=self.masker,
                       max_bytes=self.settings.step_log_max_mb * 1024 * 1024,
                       on_bytes=stream.append)
        outcomes: list[StepOutcome] = []
        status = StepStatus.ERRORED
        summary = ""
        exit_code: int | None = None
        try:
            yield sink, outcomes
            if sink.write_error is not None:
                raise PipelineError(f"disk full: cannot write the {name.value} log: {sink.write_error}")
            self.check_lease()
            if outcomes:
                status = StepStatus(outcomes[-1].status.value)
                summary = outcomes[-1].summary
                exit_code = outcomes[-1].exit_code
            else:
                status = StepStatus.PASSED
        except LeaseLost:
            summary = "the run's lease was lost to another worker"
            raise
        except PipelineError as exc:
            summary = str(exc)
            self._log_quietly(sink, f"ootci: {exc}\n")
            raise
        except Exception as exc:
            reason = infra_reason(exc)
            summary = reason or "ootci internal error (traceback in the log)"
            self._log_quietly(sink, traceback.format_exc())
            if reason is not None:
                raise PipelineError(reason) from exc
            raise
        finally:
            sink.close()
            stream.close()
            self._close_step(step_ids[0], name, log_path, status, summary, exit_code)

    def _close_step(
        self,
        step_id: int,
        name: StepName,
        log_path: Path,
        status: StepStatus,
        summary: str,
        exit_code: int | None,
    ) -> None:
        if self.heartbeat.lost.is_set():
            return  # the run is another worker's now: its attempt owns the rows
        finished = utcnow()
        try:
            log_bytes = log_path.read_bytes() if log_path.exists() else b""
        except OSError:
            log_bytes = b""

        def close(s: Session) -> None:
            row = s.get(Step, step_id)
            if row is None:  # the run was deleted meanwhile
                return
            row.status = status
            row.finished_at = finished
            row.duration_s = (finished - row.started_at).total_seconds() if row.started_at else None
            row.exit_code = exit_code
            row.summary = summary[:2000]
            row.store_log(log_bytes)
            drop_log_chunks(s, step_id)

        self.write(close)
        self._emit(RunEvent(self.run_id, "step", name.value, status, summary))

    def _emit(self, event: RunEvent) -> None:
        """Progress display only: its failure never reaches the step."""
        try:
            self.on_event(event)
        except Exception:
            log.exception("run %s: progress display failed", self.run_id)

    @staticmethod
    def _log_quietly(sink: LogSink, text: str) -> None:
        try:
            sink.write(text)
        except Exception:
            log.warning("cannot write to %s: %s", sink.path, text.strip()[:500])



    def requeue_for_retry(self, exc: PipelineError) -> bool:
        """Back to the queue if the retry budget allows another attempt (and the run is
        still ours); its failed steps stay, as that attempt's history, when the next one
        starts."""
        delays: list[int] = []

        def requeue(s: Session) -> None:
            run = s.get_one(Run, self.run_id)
            budget = 1 + self.settings.infra_retries
            if run.attempts >= budget or run.claimed_by != self.worker_id:
                return
            delay = retry_delay_s(run.attempts, self.settings.infra_retry_delay_s)
            requeue_for_retry(
                s, run, delay_s=delay,
                error=f"infra error on attempt {run.attempts} of {budget}, retrying in {delay} s: {exc}",
            )
            run.error_kind = exc.kind.value
            delays.append(delay)

        self.write(requeue)
        if not delays:
            return False
        log.warning("run %s: infra error, retrying in %s s: %s", self.run_id, delays[0], exc)
        return True

    def finish(self, state: RunState, kind: ErrorKind, error: str) -> RunState:
        """End the run in ``state`` with an error of ``kind``: the kind is stored as it is
        and sets the verdict (``ErrorKind.category``); ``error`` is for people."""

        def finish(s: Session) -> None:
            run = s.get_one(Run, self.run_id)
            if run.claimed_by != self.worker_id:
                return  # another attempt owns the run now
            run.error = error[:4000]
            run.error_kind = kind.value
            run.verdict = kind.category.value
            run.verdict_reason = error[:4000]
            if RunState(run.state) is RunState.RUNNING:
                run.transition(state)
                if state is RunState.ERRORED:
                    notify_run_errored(s, run, error, self.settings)

        self.write(finish)
        return state

