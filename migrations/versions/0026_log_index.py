"""a stored log's seek index: a page in the middle is inflated from the nearest flush
point before it, not from the log's start; a running log's chunk counts read without its
chunks' bytes

Revision ID: 0026
Revises: 0025
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable: a log stored before this has no index, and is inflated from its start.
    with op.batch_alter_table("steps") as batch:
        batch.add_column(sa.Column("log_index", sa.JSON(), nullable=True))
    # Covering: a running log's line count and its seek to a page read the chunks' counts
    # from this index alone. In SQLite ``newlines`` (added by 0025) sits after each row's
    # blob, so reading it from the table walks every chunk's overflow pages: the log.
    op.create_index("ix_log_chunks_lines", "log_chunks",
                    ["step_id", "seq", "start", "stop", "newlines"])


def downgrade() -> None:
    op.drop_index("ix_log_chunks_lines", table_name="log_chunks")
    with op.batch_alter_table("steps") as batch:
        batch.drop_column("log_index")
