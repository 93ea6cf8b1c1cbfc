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
    op.create_table(
        "pin_reports",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("backend_id", sa.Integer(), nullable=False),
        sa.Column("week", sa.Date(), nullable=False),
        sa.Column("generated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("current_pin", sa.String(1000), nullable=True),
        sa.Column("current_version", sa.String(100), nullable=True),
        sa.Column("green_spec", sa.String(1000), nullable=True),
        sa.Column("green_version", sa.String(100), nullable=True),
        sa.Column("green_git_version", sa.String(64), nullable=True),
        sa.Column("green_run_id", sa.Integer(), nullable=True),
        sa.Column("action", sa.String(8), nullable=False),
        sa.Column("proposed_spec", sa.String(1000), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("breakages", sa.JSON(), nullable=False),
        sa.Column("bump_pr", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["backend_id"], ["backends.id"], name="fk_pin_reports_backend_id_backends"),
        sa.ForeignKeyConstraint(["green_run_id"], ["runs.id"], name="fk_pin_reports_green_run_id_runs"),
        sa.PrimaryKeyConstraint("id", name="pk_pin_reports"),
        sa.UniqueConstraint("backend_id", "week", name="uq_pin_reports_backend_id_week"),
    )
    op.create_index("ix_pin_reports_week", "pin_reports", ["week"])


def downgrade() -> None:
    op.drop_index("ix_pin_reports_week", table_name="pin_reports")
    op.drop_table("pin_reports")
    with op.batch_alter_table("runs") as batch:
        batch.drop_constraint("uq_runs_dedupe_key", type_="unique")
        batch.drop_column("dedupe_key")
    with op.batch_alter_table("torch_builds") as batch:
        batch.drop_column("artifact_sha256")
        batch.drop_column("artifact_url")
