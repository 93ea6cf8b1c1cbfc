"""``ootci flaky list|quarantine|release``: flaky tests and the quarantine."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from service.cli.common import (
    database_outage_exits_2,
    die,
    load_settings,
    migrated_engine,
    out,
    print_json,
)

flaky_app = typer.Typer(help="Flaky tests: their rates, and quarantine.", no_args_is_help=True)


@flaky_app.command("list")
@database_outage_exits_2
def list_flaky(
    backend: Annotated[str | None, typer.Option("--backend", help="Only this backend.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print what GET /api/flaky answers.")]
    = False,
) -> None:
    """Flaky and quarantined tests over each backend's last OOTCI_FLAKY_WINDOW runs."""
    from service.api.flaky import flaky_out
    from service.db import session_scope
    from service.queries.flaky import flaky_tests

    settings = load_settings()
    engine = migrated_engine(settings)
    with session_scope(engine) as s:
        rows = flaky_tests(s, settings.flaky_window, backend=backend)
    if as_json:
        print_json([flaky_out(r).model_dump(mode="json") for r in rows])
        return
    table = Table("backend", "test", "rate", "runs", "quarantine")
    for r in rows:
        table.add_row(escape(r.backend), escape(r.nodeid), f"{r.stat.rate:.0%}",
                      f"{r.stat.not_passed}/{r.stat.runs}",
                      f"{r.quarantine.reason} by {escape(r.quarantine.by)}" if r.quarantine else "-")
    out.print(table)


def _change(backend: str, nodeid: str, *, put_in: bool) -> None:
    from service.cli.runs import cli_actor
    from service.commands.flaky import FlakyError, quarantine, release
    from service.db import session_scope

    engine = migrated_engine(load_settings())
    try:
        with session_scope(engine) as s:
            (quarantine if put_in else release)(s, backend, nodeid, actor=cli_actor())
    except FlakyError as exc:
        die(str(exc))
    out.print(f"{'quarantined' if put_in else 'released'} {escape(nodeid)} on {escape(backend)}",
              highlight=False)


@flaky_app.command("quarantine")
@database_outage_exits_2
def quarantine_test(
    backend: Annotated[str, typer.Argument(help="A registered backend.")],
    nodeid: Annotated[str, typer.Argument(help="The test's node id.")],
) -> None:
    """Quarantine NODEID on BACKEND: it still runs and is recorded, but fails no run and
    opens no breakage, until OOTCI_FLAKY_RELEASE_AFTER clean runs in a row."""
    _change(backend, nodeid, put_in=True)


@flaky_app.command("release")
@database_outage_exits_2
def release_test(
    backend: Annotated[str, typer.Argument(help="A registered backend.")],
    nodeid: Annotated[str, typer.Argument(help="The test's node id.")],
) -> None:
    """Take NODEID on BACKEND out of quarantine now."""
    _change(backend, nodeid, put_in=False)
