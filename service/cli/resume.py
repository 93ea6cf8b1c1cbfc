"""``ootci resume``: continue the runs a killed ``ootci run`` of this host left behind.

The sweep (``service/cli/sweeper.py``, run by every ``ootci run`` and ``ootci serve``)
ends such runs ``errored`` with an infra verdict; resuming puts each back in the queue,
owned by this process, and executes it here, from a clean slate, like ``ootci run``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from service.cli.common import (
    EXIT_OK,
    NO_SANDBOX_HELP,
    database_outage_exits_2,
    die,
    load_settings,
    migrated_engine,
    out,
    print_json,
    sealed_or_die,
)


@database_outage_exits_2
def resume(
    run_ids: Annotated[
        list[int] | None,
        typer.Argument(help="Runs to resume. Default: every run a killed ootci run of this host left."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the runs as a JSON list.")] = False,
    no_sandbox: Annotated[bool, typer.Option("--no-sandbox", help=NO_SANDBOX_HELP)] = False,
) -> None:
    """Resume the runs a killed `ootci run` left (ended as infra errors by the sweep)."""
    import os

    from service.cli.runs import _detail_or_die, _execute_with_progress, _exit_code, _print_results
    from service.cli.sweeper import process_started, sweep_once, this_host
    from service.commands.orphans import orphaned_run_ids
    from service.commands.orphans import resume as requeue_orphan
    from service.db import session_scope
    from service.documents import run_detail
    from service.schemas import RunDetail

    settings = sealed_or_die(load_settings(), no_sandbox)
    engine = migrated_engine(settings)
    sweep_once(engine)
    host = this_host()
    with session_scope(engine) as s:
        wanted = list(run_ids or orphaned_run_ids(s, host=host))
        pid = os.getpid()
        started = process_started(pid)
        resumed = [i for i in wanted
                   if requeue_orphan(s, i, host=host, pid=pid, started=started)]
    refused = [i for i in wanted if i not in resumed]
    if run_ids and refused:
        die(f"run(s) {refused} were not left by a killed ootci run (or are resumed already)")
    if not resumed:
        out.print("nothing to resume")
        raise typer.Exit(EXIT_OK)

    results: list[RunDetail] = []
    code = EXIT_OK
    for run_id in resumed:
        state = _execute_with_progress(engine, settings, run_id, as_json)
        with session_scope(engine) as s:
            results.append(_detail_or_die(run_detail(s, run_id), run_id))
        code = max(code, _exit_code(state))
    if as_json:
        print_json([r.model_dump(mode="json") for r in results])
    else:
        _print_results(results)
    raise typer.Exit(code)
