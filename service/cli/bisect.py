"""`ootci bisect`: drive the nightly bisections to their end in this process.

The embedded mode's counterpart of the ``ootci.bisect.advance`` task: each round records
what the probes showed, queues the next ones and executes them here, one after another,
until no bisection (or not BREAKAGE's) is running; then what they queued for GitHub (the
narrowed range's ranking, the PR report) goes out.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from service.cli.common import (
    EXIT_FAILED,
    console,
    database_outage_exits_2,
    die,
    load_settings,
    migrated_engine,
    out,
    print_json,
    worker_id,
)

# A 5-night range takes 2 probes, a month about 5: this is a guard against a loop, not a
# limit anyone should meet.
MAX_ROUNDS = 64


@database_outage_exits_2
def bisect(
    breakage_id: Annotated[
        int | None, typer.Argument(help="Only this breakage's bisection (default: every running one).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the bisections as JSON.")] = False,
) -> None:
    """Narrow the range of breakages whose last green and first red torch are several
    nightlies apart: run the backend on the nightlies in between (binary search, runs of
    trigger bisect) until one night is left, then rank that night's commits."""
    from sqlalchemy import select

    from service.cli.culprit import verify_ranked
    from service.cli.runs import report_to_github
    from service.db import session_scope
    from service.documents import bisection_out
    from service.models import Bisection, Breakage, Run, RunState
    from workers.jobs.bisect import advance
    from workers.pipeline.env.resolve import nightly_dates
    from workers.pipeline.execute import execute_run

    settings = load_settings()
    engine = migrated_engine(settings)
    with session_scope(engine) as session:
        if breakage_id is not None and session.get(Breakage, breakage_id) is None:
            die(f"no breakage {breakage_id}")
        if breakage_id is not None and session.scalar(
                select(Bisection.id).where(Bisection.breakage_id == breakage_id)) is None:
            die(f"breakage {breakage_id} has no bisection: its range is not several nightlies apart")

    for _ in range(MAX_ROUNDS):
        with session_scope(engine) as session:
            advance(session, lambda: nightly_dates(settings.nightly_index_url))
            query = select(Bisection).where(Bisection.state == "running")
            if breakage_id is not None:
                query = query.where(Bisection.breakage_id == breakage_id)
            running = list(session.scalars(query))
            pending = [p.run_id for b in running for p in b.probes
                       if p.run_id is not None and p.result == "pending"]
            queued = list(session.scalars(select(Run.id).where(
                Run.id.in_(pending), Run.state == RunState.QUEUED)))
        if not running:
            break
        if not queued:
            die("the pending probe runs are running elsewhere: `ootci bisect` again when "
                "they have finished", code=EXIT_FAILED)
        for run_id in queued:
            console.print(f"bisect: probe run {run_id}")
            execute_run(engine, settings, run_id, worker_id())
    else:
        die(f"still bisecting after {MAX_ROUNDS} rounds", code=EXIT_FAILED)
    report_to_github(engine, settings)  # ranks the narrowed ranges
    with session_scope(engine) as session:
        ended = select(Bisection.breakage_id).where(Bisection.state != "running")
        if breakage_id is not None:
            ended = ended.where(Bisection.breakage_id == breakage_id)
        narrowed = set(session.scalars(ended))
    # As after a red `ootci run`: the narrowed range's top suspects, undone and rerun.
    verify_ranked(engine, settings, only=narrowed)

    with session_scope(engine) as session:
        chosen = select(Bisection.breakage_id).order_by(Bisection.id)
        if breakage_id is not None:
            chosen = chosen.where(Bisection.breakage_id == breakage_id)
        docs = [(i, d) for i in session.scalars(chosen) if (d := bisection_out(session, i))]
    if as_json:
        print_json([{"breakage_id": i, **d.model_dump(mode="json")} for i, d in docs])
        return
    for i, doc in docs:
        ends = (f"{doc.narrowed_to.good} .. {doc.narrowed_to.bad}" if doc.narrowed_to else "-")
        out.print(f"breakage {i}: {doc.state}: {escape(ends)}; "
                  f"{len([p for p in doc.probes if p.run_id])} probe run(s)")
