"""issue #14's doors: steps.log_tail (a tail read without inflating the log);
webhook_deliveries.dedupe_key (one delivery per event, whatever its delivery id);
backend_changes (who registered or re-pointed a backend, and when)

Revision ID: 0006
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("steps") as batch:
        batch.add_column(sa.Column("log_tail", sa.LargeBinary(), nullable=True))
    with op.batch_alter_table("webhook_deliveries") as batch:
        batch.add_column(sa.Column("dedupe_key", sa.String(64), nullable=True))
        batch.create_index("ix_webhook_deliveries_dedupe_key", ["dedupe_key"], unique=True)
    op.create_table(
        "backend_changes",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "backend_id", sa.Integer(), sa.ForeignKey("backends.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("changed_by", sa.String(200), nullable=False),
        sa.Column("change", sa.String(32), nullable=False),
        sa.Column("source_before", sa.String(1000), nullable=True),
        sa.Column("source_after", sa.String(1000), nullable=False),
    )
    op.create_index("ix_backend_changes_backend", "backend_changes", ["backend_id"])


def downgrade() -> None:
    op.drop_index("ix_backend_changes_backend", table_name="backend_changes")
    op.drop_table("backend_changes")
    with op.batch_alter_table("webhook_deliveries") as batch:
        batch.drop_index("ix_webhook_deliveries_dedupe_key")
        batch.drop_column("dedupe_key")
    with op.batch_alter_table("steps") as batch:
        batch.drop_column("log_tail")
