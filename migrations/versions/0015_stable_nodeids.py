"""stable node ids (test_results, failures); failures.consequences

pytest picked its rootdir above a run's copy of a backend when the backend had no pytest
config of its own and the checkout holding ``./.ootci`` had one: node ids came out as
``.ootci/cache/sources/<name>/nogit-<hash>/tests/test_x.py::test_y``, a new id with every
edit, sha and home, so a test lost its history and its breakage. The test step now pins
``--rootdir`` to the tree; this re-keys what was stored before, as
``service.domain.nodeids.stable_nodeid`` does (its pattern frozen here: a migration does
not change when the domain does). ``ootci reclassify`` recomputes the fingerprints and
breakages from the re-keyed ids.

``failures.consequences``: the failures folded into this one because they only repeat its
cause (``service/domain/consequences.py``); stored ones have none.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

_RUN_TREE_PREFIX = re.compile(
    r"^(?:[^:]*/)?sources/[^/:]+/(?:nogit-[0-9a-f]+|[0-9a-f]{24}(?:-[0-9a-f]{8})?)/"
)


def _stable(nodeid: str) -> str:
    return _RUN_TREE_PREFIX.sub("", nodeid, count=1)


def _rekey(table: str) -> None:
    rows = sa.table(table, sa.column("id", sa.Integer), sa.column("nodeid", sa.String))
    bind = op.get_bind()
    found = bind.execute(
        sa.select(rows.c.id, rows.c.nodeid).where(rows.c.nodeid.like("%sources/%"))).all()
    changed = [{"row_id": i, "stable": _stable(n)} for i, n in found if _stable(n) != n]
    if changed:
        bind.execute(
            rows.update().where(rows.c.id == sa.bindparam("row_id"))
            .values(nodeid=sa.bindparam("stable")),
            changed,
        )


def upgrade() -> None:
    _rekey("test_results")
    _rekey("failures")
    with op.batch_alter_table("failures") as batch:
        batch.add_column(sa.Column("consequences", sa.JSON(), nullable=False,
                                   server_default=sa.text("'[]'")))


def downgrade() -> None:
    with op.batch_alter_table("failures") as batch:
        batch.drop_column("consequences")
    # Where each tree was is not kept: the stable ids stay.
