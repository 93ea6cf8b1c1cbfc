"""triage actions on a breakage: links, snooze, disputes, a person's close

Revision ID: 0024
Revises: 0023
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

_COLUMNS = (
    ("links", sa.JSON()),
    ("snoozed_until", sa.DateTime(timezone=True)),
    ("snoozed_until_torch", sa.String(100)),
    ("snoozed_by", sa.String(200)),
    ("snooze_reason", sa.Text()),
    ("disputes", sa.JSON()),
    ("closed_at", sa.DateTime(timezone=True)),
    ("closed_by", sa.String(200)),
    ("close_reason", sa.Text()),
)


def upgrade() -> None:
    with op.batch_alter_table("breakages") as batch:
        for name, kind in _COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("breakages") as batch:
        for name, _ in reversed(_COLUMNS):
            batch.drop_column(name)
