"""quarantines (flaky tests per backend) and failures.quarantined

A quarantined test still runs and its failure is stored, marked, so the run page shows it
apart; it fails no run and opens no breakage.

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "quarantines",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("backend_id", sa.Integer(), nullable=False),
        sa.Column("nodeid", sa.String(1000), nullable=False),
        sa.Column("reason", sa.String(16), nullable=False),
        sa.Column("by", sa.String(200), nullable=False),
        sa.Column("rate", sa.Float(), nullable=True),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.Column("clean_runs", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["backend_id"], ["backends.id"], ondelete="CASCADE",
                                name=op.f("fk_quarantines_backend_id_backends")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quarantines")),
        sa.UniqueConstraint("backend_id", "nodeid", name=op.f("uq_quarantines_backend_id_nodeid")),
    )
    with op.batch_alter_table("failures") as batch:
        batch.add_column(sa.Column("quarantined", sa.Boolean(), nullable=False,
                                   server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("failures") as batch:
        batch.drop_column("quarantined")
    op.drop_table("quarantines")
