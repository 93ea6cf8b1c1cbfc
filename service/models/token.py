"""Named API tokens: who may write, with which role.

Only a token's sha256 is stored; the token itself is shown once, when it is made. Tokens
are 256 random bits, so an unsalted hash is enough (nothing to brute-force) and lets a
bearer token be found by one indexed lookup of its hash.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from service.models.base import Base, utcnow


class ApiToken(Base):
    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # Revoked tokens are kept (the audit log names them) but never authenticate again.
    revoked_at: Mapped[dt.datetime | None]
