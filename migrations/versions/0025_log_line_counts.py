"""line counts stored with a step's log and its streamed chunks: the last page of a log is
read from its end

Revision ID: 0025
Revises: 0024
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable: a log stored before this has no count, and is paged by reading it through.
    with op.batch_alter_table("steps") as batch:
        batch.add_column(sa.Column("log_lines", sa.BigInteger(), nullable=True))
    with op.batch_alter_table("log_chunks") as batch:
        batch.add_column(sa.Column("newlines", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("log_chunks") as batch:
        batch.drop_column("newlines")
    with op.batch_alter_table("steps") as batch:
        batch.drop_column("log_lines")
