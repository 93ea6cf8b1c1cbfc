"""runs.sandboxed: whether a run's code ran in the sandbox (false: the operator opted out)

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Old rows stay null: whether they were sealed was never recorded.
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("sandboxed", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("sandboxed")
