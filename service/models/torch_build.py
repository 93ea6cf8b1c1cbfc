"""A resolved PyTorch: what a torch spec turned into on the night it was provisioned."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from service.domain.torch_spec import SourceKind
from service.models.base import Base, utcnow

__all__ = ["SourceKind", "TorchBuild"]


class TorchBuild(Base):
    __tablename__ = "torch_builds"
    __table_args__ = (UniqueConstraint("spec", "version", "git_version"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    spec: Mapped[str] = mapped_column(String(1000))
    source_kind: Mapped[str] = mapped_column(String(16))
    version: Mapped[str] = mapped_column(String(100))
    git_version: Mapped[str] = mapped_column(String(64))
    # Content address of the provisioned environment (reused across runs).
    env_key: Mapped[str | None] = mapped_column(String(64))
    python: Mapped[str | None] = mapped_column(String(1000))
    # The exact wheel installed (its URL or file URI and sha256): what `run:<id>` reinstalls.
    # Empty for `installed` and `path:` torches, which have no wheel.
    artifact_url: Mapped[str | None] = mapped_column(String(2000))
    artifact_sha256: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    @property
    def label(self) -> str:
        """How the dashboard names the row: the version plus a short sha."""
        return f"{self.version} ({self.git_version[:10]})" if self.git_version else self.version
