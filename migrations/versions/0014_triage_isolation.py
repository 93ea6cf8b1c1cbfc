"""failures.needs_isolation/isolate_against_run_id; a passed run's verdict is compatible

Triage now blames each failure on what changed since that test or step last passed, and
says so when only an isolating run could tell torch from the backend. A run that passed
has the verdict ``compatible`` (it had none, or ``flake`` when a test passed on rerun), and
a failure stored without a triaged category gets ``unknown``: the rule's category is what
the rule suggests, never the verdict. ``ootci reclassify`` replays the new triage over
the stored history.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("failures") as batch:
        batch.add_column(sa.Column("needs_isolation", sa.Boolean(), nullable=False,
                                   server_default=sa.false()))
        batch.add_column(sa.Column("isolate_against_run_id", sa.Integer(), nullable=True))
    op.execute(
        "UPDATE runs SET verdict = 'compatible', verdict_subtype = NULL, verdict_reason = "
        "CASE WHEN verdict = 'flake' AND verdict_reason IS NOT NULL "
        "THEN 'passed; ' || verdict_reason ELSE 'passed' END "
        "WHERE state = 'passed'"
    )
    op.execute(
        "UPDATE failures SET triage = 'unknown', triage_reason = "
        "'not triaged when stored; the rule suggests ' || COALESCE(category, 'nothing') "
        "WHERE triage IS NULL"
    )


def downgrade() -> None:
    op.execute("UPDATE runs SET verdict = NULL, verdict_reason = NULL "
               "WHERE verdict = 'compatible'")
    with op.batch_alter_table("failures") as batch:
        batch.drop_column("isolate_against_run_id")
        batch.drop_column("needs_isolation")
