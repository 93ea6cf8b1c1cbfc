"""conformance_results: per run and mechanism, the conformance suite's counts and failing tests

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "conformance_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("device", sa.String(64), nullable=False),
        sa.Column("mechanism", sa.String(32), nullable=False),
        sa.Column("level", sa.String(16), nullable=False),
        sa.Column("passed", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("skipped", sa.Integer(), nullable=False),
        sa.Column("failing", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE",
                                name="fk_conformance_results_run_id_runs"),
        sa.PrimaryKeyConstraint("id", name="pk_conformance_results"),
        sa.UniqueConstraint("run_id", "mechanism", name="uq_conformance_results_run_id_mechanism"),
    )
    op.create_index("ix_conformance_results_mechanism", "conformance_results", ["mechanism"])


def downgrade() -> None:
    op.drop_index("ix_conformance_results_mechanism", table_name="conformance_results")
    op.drop_table("conformance_results")
