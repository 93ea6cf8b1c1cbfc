"""steps.attempt: every attempt keeps its steps; runs.runner_started: the runner's start time

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("steps") as batch:
        batch.add_column(sa.Column("attempt", sa.Integer(), nullable=False, server_default="1"))
    # Before this revision a new attempt deleted the earlier one's steps: the rows that are
    # left all belong to the run's latest attempt.
    op.execute(
        "UPDATE steps SET attempt = (SELECT CASE WHEN runs.attempts > 1 THEN runs.attempts "
        "ELSE 1 END FROM runs WHERE runs.id = steps.run_id)"
    )
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("runner_started", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("runner_started")
    with op.batch_alter_table("steps") as batch:
        batch.drop_column("attempt")
