"""runs.runner_host/runner_pid: the interactive process (``ootci run``) executing a run

Revision ID: 0007
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("runner_host", sa.String(200), nullable=True))
        batch.add_column(sa.Column("runner_pid", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("runner_pid")
        batch.drop_column("runner_host")
