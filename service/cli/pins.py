"""``ootci pins report``: this week's pin report per backend (made, stored, and the bump
PR owed), printed as a table, Markdown (``--markdown``) or JSON (``--json``, the documents
``GET /api/pins/reports`` answers).

Mounted by ``service/cli/app.py`` (``app.add_typer(pins.pins_app, name="pins")``).
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from service.cli.common import EXIT_USAGE, die, load_settings, migrated_engine, out, print_json

pins_app = typer.Typer(help="The weekly upstream pin report and its bump PRs.", no_args_is_help=True)


@pins_app.command("report")
def report(
    as_json: Annotated[bool, typer.Option("--json", help="Print the reports as JSON.")] = False,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print the reports as Markdown.")] = False,
    weeks: Annotated[int, typer.Option(min=1, max=52, help="Weeks of history to print.")] = 1,
    stored: Annotated[
        bool, typer.Option("--stored", help="Print the stored reports without making this week's.")
    ] = False,
) -> None:
    """Make this week's pin report for every backend (replacing one made earlier this week),
    owe the bump PR where ``[pins]`` is configured, and print the reports."""
    from service.db import session_scope
    from service.documents import pin_report_list
    from service.queries.pin_reports import reports
    from workers.jobs.pin_reports import PinConfigError, make_weekly_reports

    if as_json and markdown:
        die("--json and --markdown: choose one", EXIT_USAGE)
    settings = load_settings()
    engine = migrated_engine(settings)
    if not stored:
        try:
            make_weekly_reports(engine, settings)
        except PinConfigError as exc:
            die(str(exc))
    with session_scope(engine) as s:
        if as_json:
            print_json({"reports": [r.model_dump(mode="json") for r in pin_report_list(s, weeks=weeks)]})
            return
        rows = reports(s, weeks=weeks)
        if markdown:
            from service.domain.pin_bump import render_markdown

            out.print(render_markdown([r.view(name) for r, name in rows]), markup=False,
                      highlight=False, soft_wrap=True)
            return
        table = Table("week", "backend", "pin", "newest green", "action", "reason")
        for r, name in rows:
            table.add_row(
                r.week.isoformat(), escape(name), escape(r.current_pin or "-"),
                escape(r.green_spec or "-"), r.action, escape(r.reason),
            )
        out.print(table)
