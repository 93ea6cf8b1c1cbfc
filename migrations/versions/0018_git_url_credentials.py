"""strip credentials from stored git URLs (backends, backend_changes)

A backend registered from ``https://user:token@host/repo.git`` kept the token in its row,
and ``GET /api/backends`` served it (issue #33). Registration now refuses such a URL and
the workers take tokens from ``OOTCI_GIT_CREDENTIALS``; this removes the ``userinfo`` part
from what was stored before. A backend that needed the token fetches with the setting from
now on (set it before upgrading). ``ssh://`` and ``git@host:path`` user names are kept.
The downgrade cannot restore what was removed.

Revision ID: 0018
Revises: 0017 (re-point at 0017 when merging: 0016/0017 are other branches')
"""

from __future__ import annotations

import urllib.parse

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def _stripped(url: str | None) -> str | None:
    # Frozen here (service.sources.without_userinfo may change; a migration must not).
    if not url or "://" not in url:
        return url
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc or parts.scheme not in {"http", "https"} and parts.password is None:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def _strip(table: str, columns: tuple[str, ...]) -> None:
    bind = op.get_bind()
    meta = sa.Table(table, sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True),
                    *(sa.Column(c, sa.String(1000)) for c in columns))
    rows = bind.execute(sa.select(meta).where(sa.or_(*(meta.c[c].like("%://%@%") for c in columns))))
    for row in rows.mappings().all():
        changed = {c: _stripped(row[c]) for c in columns if _stripped(row[c]) != row[c]}
        if changed:
            bind.execute(meta.update().where(meta.c.id == row["id"]).values(**changed))


def upgrade() -> None:
    _strip("backends", ("source",))
    _strip("backend_changes", ("source_before", "source_after"))


def downgrade() -> None:
    pass  # the credentials are gone on purpose
