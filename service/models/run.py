"""A run: one backend at one sha built and tested against one torch build.

The aggregate is Run with its Steps, TestResults and Failures; every write goes through
the run so that a crash leaves a consistent, re-claimable row.
"""

from __future__ import annotations

import datetime as dt
import zlib
from collections.abc import Iterator
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    false,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from service.domain.log_index import compress_indexed
from service.domain.states import RunState, StepStatus
from service.models.base import Base, utcnow
from service.models.masked import MaskedJSON, MaskedString, MaskedText
from service.models.torch_build import TorchBuild

STORED_TAIL_BYTES = 64 * 1024
# The stored tail holds at least this many last lines (up to STORED_TAIL_MAX_BYTES): a log
# page's worth and the line before it, so the last page (where a log view opens) comes
# from the tail and never inflates the log. Pages are 500 lines (api/pages/logview.py).
STORED_TAIL_LINES = 501
STORED_TAIL_MAX_BYTES = 2 * 1024 * 1024

def line_count(data: bytes) -> int:
    """Lines as a log page counts them: one per newline, and an unfinished last line."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _tail_from(data: bytes) -> int:
    """Where the stored tail starts: the last STORED_TAIL_BYTES, widened back to hold
    STORED_TAIL_LINES lines if that takes no more than STORED_TAIL_MAX_BYTES. A log with
    fewer lines is all one page: reading that page reads the log, so no copy is kept."""
    start = max(0, len(data) - STORED_TAIL_BYTES)
    floor = max(0, len(data) - STORED_TAIL_MAX_BYTES)
    pos = len(data) - 1 if data.endswith(b"\n") else len(data)
    for _ in range(STORED_TAIL_LINES + 1):
        pos = data.rfind(b"\n", floor, pos)
        if pos < 0:
            return start
    return min(start, pos + 1)


ALLOWED_TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    # Its upstream build appeared (queued), or never did (errored: expired).
    RunState.WAITING: frozenset({RunState.QUEUED, RunState.ERRORED}),
    RunState.QUEUED: frozenset({RunState.RUNNING, RunState.ERRORED}),
    # RUNNING -> QUEUED happens when a lease expires and the run is handed back.
    RunState.RUNNING: frozenset(
        {RunState.PASSED, RunState.FAILED, RunState.ERRORED, RunState.QUEUED}
    ),
    RunState.PASSED: frozenset(),
    RunState.FAILED: frozenset(),
    RunState.ERRORED: frozenset(),
}


class IllegalTransition(RuntimeError):
    pass


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_backend_created", "backend_id", "created_at"),
        Index("ix_runs_state_created", "state", "created_at"),
        # The matrix and triage look runs up by torch build.
        Index("ix_runs_torch_build", "torch_build_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    backend_id: Mapped[int] = mapped_column(ForeignKey("backends.id"))
    torch_spec: Mapped[str] = mapped_column(String(1000))
    torch_build_id: Mapped[int | None] = mapped_column(ForeignKey("torch_builds.id"))
    backend_sha: Mapped[str | None] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16), default=RunState.QUEUED)
    trigger: Mapped[str] = mapped_column(String(32), default="cli")
    # What caused it: webhook delivery id, PR number, schedule name... (free-form, shown).
    trigger_info: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # One run per subject: "pr:<number>:<head sha>:<backend id>" for a PR run, so a repeated
    # label or synchronize at the same sha queues nothing new. None: no such rule.
    dedupe_key: Mapped[str | None] = mapped_column(String(200), unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    started_at: Mapped[dt.datetime | None]
    finished_at: Mapped[dt.datetime | None]
    # Claiming: a worker owns a running run until its lease expires.
    claimed_by: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[dt.datetime | None]
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # Set when an attempt failed on infrastructure and the run went back to the queue:
    # no worker claims it before then (the backoff), and the sweeper counts from then.
    retry_at: Mapped[dt.datetime | None]
    # The interactive process executing the run (``ootci run``, ``ootci resume``): when it
    # is gone from its host, the next sweep there ends the run as infra (``ootci resume``).
    runner_host: Mapped[str | None] = mapped_column(String(200))
    runner_pid: Mapped[int | None] = mapped_column(Integer)
    # When that process started (clock ticks after boot, /proc/PID/stat field 22): a PID
    # the kernel handed to another process since is then not taken for the runner.
    runner_started: Mapped[int | None] = mapped_column(BigInteger)
    error: Mapped[str | None] = mapped_column(MaskedText)
    # False: the operator ran it with the sandbox off (``--no-sandbox``/``OOTCI_SANDBOX=off``):
    # its code ran with the worker's rights. None: not started yet, or run before this was kept.
    sandboxed: Mapped[bool | None]
    # The kind of that error (``service.domain.verdict.ErrorKind``): what the verdict and
    # ``ootci run``'s exit code follow. None while the run has no error.
    error_kind: Mapped[str | None] = mapped_column(String(16))
    # Triage verdict of the whole run (filled after classification).
    verdict: Mapped[str | None] = mapped_column(String(16))
    verdict_subtype: Mapped[str | None] = mapped_column(String(32))
    verdict_reason: Mapped[str | None] = mapped_column(MaskedText)

    torch_build: Mapped[TorchBuild | None] = relationship(lazy="joined")
    # Every attempt's steps; ``steps`` is the current attempt's, what every view shows.
    step_rows: Mapped[list[Step]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="[Step.attempt, Step.id]"
    )
    test_results: Mapped[list[TestResult]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="TestResult.id"
    )
    failures: Mapped[list[Failure]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="Failure.id"
    )

    def transition(self, new: RunState, *, now: dt.datetime | None = None) -> None:
        current = RunState(self.state)
        if new not in ALLOWED_TRANSITIONS[current]:
            raise IllegalTransition(f"run {self.id}: {current} -> {new} is not allowed")
        now = now or utcnow()
        self.state = new
        if new is RunState.RUNNING:
            self.started_at = now
        elif new.finished:
            self.finished_at = now
            self.claimed_by = None
            self.lease_expires_at = None

    @property
    def duration_s(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None

    @property
    def current_attempt(self) -> int:
        """The newest attempt that opened a step (1 for a run with none yet)."""
        return max((s.attempt for s in self.step_rows), default=1)

    @property
    def steps(self) -> list[Step]:
        """The current attempt's steps: earlier attempts are history (``earlier_steps``)."""
        current = self.current_attempt
        return [s for s in self.step_rows if s.attempt == current]

    @property
    def earlier_steps(self) -> dict[int, list[Step]]:
        """The steps of each attempt before the current one, by attempt number."""
        current = self.current_attempt
        earlier: dict[int, list[Step]] = {}
        for s in self.step_rows:
            if s.attempt < current:
                earlier.setdefault(s.attempt, []).append(s)
        return earlier


class Step(Base):
    __tablename__ = "steps"
    __table_args__ = (Index("ix_steps_run_name", "run_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    # Which attempt of the run ran it (runs.attempts when it started): a retry keeps the
    # earlier attempts' rows, so the run page can show why they ended.
    attempt: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    name: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), default=StepStatus.PENDING)
    started_at: Mapped[dt.datetime | None]
    finished_at: Mapped[dt.datetime | None]
    duration_s: Mapped[float | None] = mapped_column(Float)
    exit_code: Mapped[int | None]
    # While running, the log streams to log_path; when the step ends it is stored here too,
    # zlib-compressed, so the database alone holds the full history.
    log_path: Mapped[str | None] = mapped_column(String(2000))
    log_compressed: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    log_size: Mapped[int | None]
    # The last STORED_TAIL_BYTES of the log, uncompressed: a tail (the dashboard's and the
    # API's default view) is answered from here without inflating the whole log.
    log_tail: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    # Lines in the stored log as a log page counts them (a last line without a newline
    # counts); None for a log stored before it was counted.
    log_lines: Mapped[int | None] = mapped_column(BigInteger)
    # Where the compressed log can be inflated from mid-way (``domain/log_index.py``): a
    # page in the middle is read from the nearest point before it. None for a log stored
    # before it was indexed (read from its start).
    log_index: Mapped[list[Any] | None] = mapped_column(JSON, deferred=True)
    summary: Mapped[str | None] = mapped_column(MaskedText)

    run: Mapped[Run] = relationship(back_populates="step_rows")

    def store_log(self, data: bytes) -> None:
        self.log_compressed, self.log_index = compress_indexed(data)
        self.log_size = len(data)
        self.log_lines = line_count(data)
        self.log_tail = data[_tail_from(data):]

    def iter_log(self, chunk: int = 1024 * 1024) -> Iterator[bytes]:
        """The stored log in pieces of at most ``chunk`` bytes, inflated as they are read:
        a reader holds one piece at a time, never the whole log."""
        if self.log_compressed is None:
            return
        inflater = zlib.decompressobj()
        compressed = memoryview(self.log_compressed)
        # Fed in small slices: unconsumed_tail is a copy of whatever input is left over.
        for at in range(0, len(compressed), 64 * 1024):
            pending: bytes = compressed[at : at + 64 * 1024].tobytes()
            while pending:
                piece = inflater.decompress(pending, chunk)
                pending = inflater.unconsumed_tail
                if piece:
                    yield piece
        rest = inflater.flush()
        if rest:
            yield rest

    def read_log(self) -> bytes:
        if self.log_compressed is not None:
            return zlib.decompress(self.log_compressed)
        if self.log_path:
            try:
                with open(self.log_path, "rb") as fh:
                    return fh.read()
            except OSError:
                return b""
        return b""


class TestResult(Base):
    __tablename__ = "test_results"
    __table_args__ = (
        Index("ix_test_results_run", "run_id"),
        Index("ix_test_results_nodeid", "nodeid"),
    )
    __test__ = False  # not a pytest class

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    nodeid: Mapped[str] = mapped_column(MaskedString(1000))
    # The contract-suite file (mechanism) the test belongs to, for the matrix columns.
    suite: Mapped[str] = mapped_column(String(200))
    outcome: Mapped[str] = mapped_column(String(16))
    duration_s: Mapped[float | None] = mapped_column(Float)
    message: Mapped[str | None] = mapped_column(MaskedText)
    details: Mapped[str | None] = mapped_column(MaskedText)

    run: Mapped[Run] = relationship(back_populates="test_results")


class Failure(Base):
    __tablename__ = "failures"
    __table_args__ = (
        Index("ix_failures_run", "run_id"),
        Index("ix_failures_fingerprint", "fingerprint"),
        Index("ix_failures_breakage", "breakage_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    step_name: Mapped[str] = mapped_column(String(16))
    stage: Mapped[str] = mapped_column(String(16))  # build | import | test | provision
    nodeid: Mapped[str | None] = mapped_column(MaskedString(1000))
    # The line that matters and where it was.
    line: Mapped[str] = mapped_column(MaskedText, default="")
    line_no: Mapped[int | None]
    captures: Mapped[dict[str, Any]] = mapped_column(MaskedJSON, default=dict)
    # Classifier output (the full Finding is kept for "why this verdict"): ``category`` is
    # what the rule suggests, never shown as the verdict (that is ``triage``).
    category: Mapped[str | None] = mapped_column(String(16))
    subtype: Mapped[str | None] = mapped_column(String(32))
    rule: Mapped[str | None] = mapped_column(String(100))
    fingerprint: Mapped[str | None] = mapped_column(String(64))
    fingerprint_version: Mapped[int | None]
    finding: Mapped[dict[str, Any]] = mapped_column(MaskedJSON, default=dict)
    # Triage: upstream | backend | infra | flake | unknown, and why. This is the failure's
    # verdict, what every view shows; ``category`` above is only what the rule suggests.
    triage: Mapped[str | None] = mapped_column(String(16))
    triage_reason: Mapped[str | None] = mapped_column(MaskedText)
    # Triage could not tell torch from the backend (both changed since it passed, or it
    # never did): an isolating run would decide, on the torch of this run when there is one
    # (the last the failure passed on).
    needs_isolation: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # The test was quarantined (flaky) when it failed: shown apart, never a breakage or a red run.
    quarantined: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    isolate_against_run_id: Mapped[int | None] = mapped_column(Integer)
    # What the isolating run found for it (``IsolationResult.to_dict``), kept so that
    # ``ootci reclassify`` replays the experiment's answer instead of losing it.
    isolation: Mapped[dict[str, Any] | None]
    breakage_id: Mapped[int | None] = mapped_column(ForeignKey("breakages.id"))
    # Failures of the same step that only repeat this one's cause (a half-imported torch
    # failing every later test module: service/domain/consequences.py), folded into it:
    # [{"nodeid": ..., "message": ...}] in the order they happened. They have no row.
    consequences: Mapped[list[Any]] = mapped_column(MaskedJSON, default=list)

    run: Mapped[Run] = relationship(back_populates="failures")

    @property
    def verdict(self) -> str | None:
        """The failure's verdict: what triage blames (``triage``), shown everywhere."""
        return self.triage

    @property
    def rule_category(self) -> str | None:
        """What the classifier's rule suggests (``category``): shown as a suggestion,
        never as the verdict, which is ``triage``."""
        return self.category
