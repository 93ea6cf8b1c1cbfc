"""The nightly matrix: every registered backend against every nightly target (the pins
and ``nightly``), one run each per night.

A plain function: the ``ootci.nightly.schedule`` task (``workers/tasks.py``) calls it and
dispatches what it created.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from service.commands.runs import create_run
from service.domain.targets import nightly_targets
from service.models import Backend, Run

NIGHTLY = "nightly"


def plan_nightly(session: Session, pins: list[str], night: dt.date) -> list[int]:
    """Create the night's missing runs; the natural key is backend x spec x night.

    Only rows whose trigger_info names this night count, so re-sending the task (or a
    beat that fires twice) adds nothing."""
    if session.get_bind().dialect.name == "postgresql":
        # Two schedulers racing would both see "missing": serialise them on this night.
        session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": night.toordinal()})
    window = dt.datetime.combine(night, dt.time(), tzinfo=dt.UTC)
    existing = {
        (backend_id, spec)
        for backend_id, spec, info in session.execute(
            select(Run.backend_id, Run.torch_spec, Run.trigger_info).where(
                Run.trigger == NIGHTLY,
                # No upper bound: a night planned late (a redelivered task, a beat that
                # catches up) must still see the runs already made for it.
                Run.created_at >= window - dt.timedelta(days=1),
            )
        )
        if isinstance(info, dict) and info.get("night") == night.isoformat()
    }
    created = []
    # Registered backends only (`ootci backend add`): CLI experiments and corpus runs are not
    # the nightly's.
    for backend in session.scalars(select(Backend).where(Backend.nightly).order_by(Backend.name)):
        for spec in nightly_targets(pins):
            if (backend.id, spec) in existing:
                continue
            run = create_run(
                session,
                backend,
                spec,
                trigger=NIGHTLY,
                trigger_info={"schedule": NIGHTLY, "night": night.isoformat()},
            )
            created.append(run.id)
    return created
