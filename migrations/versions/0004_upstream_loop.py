"""the upstream loop: a breakage's regression range and culprits note; the GitHub outbox

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("breakages") as batch:
        batch.add_column(sa.Column("range_base_run_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("range_base_sha", sa.String(64), nullable=True))
        batch.add_column(sa.Column("range_head_sha", sa.String(64), nullable=True))
        batch.add_column(sa.Column("range_base_version", sa.String(100), nullable=True))
        batch.add_column(sa.Column("range_head_version", sa.String(100), nullable=True))
        batch.add_column(sa.Column("range_note", sa.Text(), nullable=True))
        batch.add_column(sa.Column("culprits_note", sa.Text(), nullable=True))
        batch.add_column(
            sa.Column("culprits_ranked_at", sa.DateTime(timezone=True), nullable=True)
        )
        batch.create_foreign_key(
            "fk_breakages_range_base_run_id_runs", "runs", ["range_base_run_id"], ["id"]
        )
    op.create_table(
        "outbox",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("target", sa.String(300), nullable=False),
        sa.Column("dedupe_key", sa.String(128), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("breakage_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_outbox"),
        sa.UniqueConstraint("dedupe_key", name="uq_outbox_dedupe_key"),
    )
    op.create_index("ix_outbox_state_due", "outbox", ["state", "due_at"])


def downgrade() -> None:
    op.drop_index("ix_outbox_state_due", table_name="outbox")
    op.drop_table("outbox")
    with op.batch_alter_table("breakages") as batch:
        batch.drop_constraint("fk_breakages_range_base_run_id_runs", type_="foreignkey")
        for name in (
            "culprits_ranked_at", "culprits_note", "range_note", "range_head_version",
            "range_base_version", "range_head_sha", "range_base_sha", "range_base_run_id",
        ):
            batch.drop_column(name)
