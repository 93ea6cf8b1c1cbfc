"""culprit_verifications: a suspect undone in an overlay of the red torch, and the answer

Issue #29: a label on an upstream PR is a public accusation, so a suspect is verified by
rebuilding the backend on the red torch with the suspect's installed files restored to the
range base. Each verification keeps the suspect, its state (confirmed, refuted,
unverifiable, error), the run on the overlay and the evidence in words.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "culprit_verifications",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("breakage_id", sa.Integer(), sa.ForeignKey("breakages.id"), nullable=False),
        sa.Column("sha", sa.String(64), nullable=False),
        sa.Column("pr", sa.Integer(), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id"), nullable=True),
        sa.Column("evidence", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_culprit_verifications_breakage", "culprit_verifications",
                    ["breakage_id", "sha"])


def downgrade() -> None:
    op.drop_index("ix_culprit_verifications_breakage", table_name="culprit_verifications")
    op.drop_table("culprit_verifications")
