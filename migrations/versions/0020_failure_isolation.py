"""failures.isolation: what the isolating run found for a failure, kept for reclassify

``ootci reclassify`` replays triage from stored logs and results; an isolating run's
answer is an experiment, not in any log, and was lost by the replay (a failure isolated to
upstream came back unknown). Failures stored before this revision have none.

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("failures") as batch:
        batch.add_column(sa.Column("isolation", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("failures") as batch:
        batch.drop_column("isolation")
