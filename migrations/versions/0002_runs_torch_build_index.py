"""index runs by torch build (matrix and triage look-ups)

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_runs_torch_build", "runs", ["torch_build_id"])


def downgrade() -> None:
    op.drop_index("ix_runs_torch_build", table_name="runs")
