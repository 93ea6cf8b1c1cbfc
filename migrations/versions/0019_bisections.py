"""bisections, bisection_probes: nightly bisection of a breakage's range

A breakage whose range spans several nightlies is narrowed by probe runs on the nights
in between (``service/domain/bisect.py``); these tables link each probe run to the
breakage's bisection and keep the range it started from.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "bisections",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("breakage_id", sa.Integer(), nullable=False),
        sa.Column("backend_id", sa.Integer(), nullable=False),
        sa.Column("head_run_id", sa.Integer(), nullable=False),
        sa.Column("base_run_id", sa.Integer(), nullable=False),
        sa.Column("base_version", sa.String(100), nullable=False),
        sa.Column("head_version", sa.String(100), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("good_run_id", sa.Integer(), nullable=False),
        sa.Column("bad_run_id", sa.Integer(), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["breakage_id"], ["breakages.id"],
                                name=op.f("fk_bisections_breakage_id_breakages")),
        sa.ForeignKeyConstraint(["backend_id"], ["backends.id"],
                                name=op.f("fk_bisections_backend_id_backends")),
        sa.ForeignKeyConstraint(["head_run_id"], ["runs.id"],
                                name=op.f("fk_bisections_head_run_id_runs")),
        sa.ForeignKeyConstraint(["base_run_id"], ["runs.id"],
                                name=op.f("fk_bisections_base_run_id_runs")),
        sa.ForeignKeyConstraint(["good_run_id"], ["runs.id"],
                                name=op.f("fk_bisections_good_run_id_runs")),
        sa.ForeignKeyConstraint(["bad_run_id"], ["runs.id"],
                                name=op.f("fk_bisections_bad_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bisections")),
        sa.UniqueConstraint("breakage_id", name=op.f("uq_bisections_breakage_id")),
    )
    op.create_table(
        "bisection_probes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("bisection_id", sa.Integer(), nullable=False),
        sa.Column("night", sa.Date(), nullable=False),
        sa.Column("spec", sa.String(100), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("result", sa.String(16), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["bisection_id"], ["bisections.id"], ondelete="CASCADE",
                                name=op.f("fk_bisection_probes_bisection_id_bisections")),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"],
                                name=op.f("fk_bisection_probes_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bisection_probes")),
    )
    op.create_index("ix_bisection_probes_run", "bisection_probes", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_bisection_probes_run", table_name="bisection_probes")
    op.drop_table("bisection_probes")
    op.drop_table("bisections")
