"""A shard: one slice of a run's test step that any worker may run (issue #19).

The run's owner builds once, lists the suite's files and splits them into shards; each
shard is claimed like a run (a conditional UPDATE and a lease), runs the files it names
against the owner's built artefact (the torch env and build dir in the shared cache, named
in ``artefact``) and stores its records in ``result``. The owner runs shards too, takes over
any whose lease ran out, and merges them into the run's one test step and verdict.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from service.models.base import Base, utcnow
from service.models.masked import MaskedJSON


class ShardState:
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"


class TestShard(Base):
    __tablename__ = "test_shards"
    __table_args__ = (UniqueConstraint("run_id", "index"),)
    __test__ = False  # not a pytest class

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    index: Mapped[int] = mapped_column(Integer)
    # The files this shard runs, and every file of the suite (a shard collects only its own).
    files: Mapped[list[Any]] = mapped_column(default=list)
    all_files: Mapped[list[Any]] = mapped_column(default=list)
    # What the owner built, for the shard to test: the torch env, the build dir, the source.
    artefact: Mapped[dict[str, Any]] = mapped_column(default=dict)
    state: Mapped[str] = mapped_column(String(16), default=ShardState.QUEUED)
    claimed_by: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[dt.datetime | None]
    # Records, exit code, problem and log tail of the finished shard.
    result: Mapped[dict[str, Any] | None] = mapped_column(MaskedJSON)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[dt.datetime | None]
