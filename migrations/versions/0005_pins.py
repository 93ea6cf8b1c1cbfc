"""reproducible torch: the artifact each torch build was installed from; one run per PR head
and backend; weekly pin reports

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("dedupe_key", sa.String(200), nullable=True))
        batch.create_unique_constraint("uq_runs_dedupe_key", ["dedupe_key"])
    with op.batch_alter_table("torch_builds") as batch:
        batch.add_column(sa.Column("artifact_url", sa.String(2000), nullable=True))
        batch.add_column(sa.Column("artifact_sha256", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_constraint("uq_runs_dedupe_key", type_="unique")
        batch.drop_column("dedupe_key")
    with op.batch_alter_table("torch_builds") as batch:
        batch.drop_column("artifact_sha256")
        batch.drop_column("artifact_url")
