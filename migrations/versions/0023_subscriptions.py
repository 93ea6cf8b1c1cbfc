"""subscriptions: per-backend notifications (webhook, email, chat), sent through the outbox

Revision ID: 0023
Revises: 0022
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "subscriptions",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("backend_id", sa.Integer(), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("channel", sa.String(16), nullable=False),
        sa.Column("target", sa.String(2000), nullable=False),
        sa.Column("secret", sa.String(100), nullable=True),
        sa.Column("digest", sa.Boolean(), nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["backend_id"], ["backends.id"], ondelete="CASCADE",
                                name=op.f("fk_subscriptions_backend_id_backends")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subscriptions")),
    )


def downgrade() -> None:
    op.drop_table("subscriptions")
