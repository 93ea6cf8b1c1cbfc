"""A backend under test: where its source is and how to build and test it (its recipe)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from service.models.base import Base, utcnow


class Backend(Base):
    __tablename__ = "backends"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    # A directory, or a git URL (with `ref`) that the pipeline clones.
    source: Mapped[str] = mapped_column(String(1000))
    ref: Mapped[str | None] = mapped_column(String(200))
    # The parsed ootci.toml, as of the last run: shown on the dashboard, diffed when it changes.
    recipe: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
