"""runs.error_kind: the kind of the error a run ended (or waits for a retry) with

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("error_kind", sa.String(16), nullable=True))
    # Before this revision the kind was only the start of the error's text.
    for kind in ("usage", "infra", "upstream", "internal"):
        op.execute(
            sa.text("UPDATE runs SET error_kind = :kind WHERE error LIKE :prefix").bindparams(
                kind=kind, prefix=f"{kind} error%"
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("error_kind")
