"""A backend under test: where its source is and how to build and test it (its recipe)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import ForeignKey, Index, String, false
from sqlalchemy.orm import Mapped, mapped_column

from service.models.base import Base, utcnow


class Backend(Base):
    __tablename__ = "backends"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    # A directory, or a git URL (with `ref`) that the pipeline clones.
    source: Mapped[str] = mapped_column(String(1000))
    ref: Mapped[str | None] = mapped_column(String(200))
    # The backend's directory inside a git source (a monorepo's backend/): None = the root.
    subdir: Mapped[str | None] = mapped_column(String(300))
    # Registered with `ootci backend add` (or the API): the nightly plans it and a push to
    # its repository rebuilds it. Backends that only appeared through `ootci run --backend
    # DIR` experiments or corpus runs are not.
    nightly: Mapped[bool] = mapped_column(default=False, server_default=false())
    # The parsed ootci.toml, as of the last run: shown on the dashboard, diffed when it changes.
    recipe: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class BackendChange(Base):
    """Who registered or re-pointed a backend, and when: a backend's name decides what the
    API, webhooks and the nightly schedule run, so changing what it names is recorded."""

    __tablename__ = "backend_changes"
    __table_args__ = (Index("ix_backend_changes_backend", "backend_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    backend_id: Mapped[int] = mapped_column(ForeignKey("backends.id", ondelete="CASCADE"))
    changed_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    changed_by: Mapped[str] = mapped_column(String(200))  # e.g. cli:alice@build-host
    change: Mapped[str] = mapped_column(String(32))  # registered | re-registered | removed
    source_before: Mapped[str | None] = mapped_column(String(1000))
    source_after: Mapped[str] = mapped_column(String(1000))
