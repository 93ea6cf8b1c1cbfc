"""issue #16's backend registry: backends.subdir (the backend's dir inside a git source) and
backends.nightly (registered for the nightly and push rebuilds, not a CLI experiment)

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("backends") as batch:
        batch.add_column(sa.Column("subdir", sa.String(300), nullable=True))
        batch.add_column(
            sa.Column("nightly", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    # Before the registry, every backend but the corpus's synthetic ones was on the nightly:
    # an upgrade keeps what a deployment already runs every night.
    op.execute(
        sa.text("UPDATE backends SET nightly = :yes WHERE name NOT LIKE :corpus").bindparams(
            yes=True, corpus="%-corpus"
        )
    )


def downgrade() -> None:
    with op.batch_alter_table("backends") as batch:
        batch.drop_column("nightly")
        batch.drop_column("subdir")
