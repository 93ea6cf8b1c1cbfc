"""``ootci breakage ID note|link|snooze|dispute|close|reopen``: triage by people, against the
local database as the other commands work; each action one transaction and one audit entry
(``service/commands/triage_actions.py``). Bad input is one line and exit 2, nothing written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.markup import escape

from service.cli.common import database_outage_exits_2, die, load_settings, migrated_engine, out

breakage_app = typer.Typer(
    help="Triage one breakage: a note, a bug link, snooze, dispute a suspect, close, reopen.",
    no_args_is_help=True,
)
MAX_ID = 2**31 - 1


@breakage_app.callback()
def breakage(
    ctx: typer.Context,
    breakage_id: Annotated[str, typer.Argument(metavar="ID", help="The breakage's id.")],
) -> None:
    """Triage breakage ID (ootci breakage 7 note "known, see the bug")."""
    if not breakage_id.isdigit() or not 1 <= int(breakage_id) <= MAX_ID:
        die(f"not a breakage id: {breakage_id!r}")
    ctx.obj = int(breakage_id)


def _apply(ctx: typer.Context, said: str, do: Callable[..., Any], *args: Any, **kw: Any) -> None:
    from service.cli.runs import cli_actor
    from service.commands.triage_actions import TriageInputError, UnknownBreakage
    from service.db import session_scope

    settings = load_settings()
    engine = migrated_engine(settings)
    report = kw.pop("with_report", False)
    extra = ({"repo": settings.upstream_repo, "min_score": settings.culprit_min_score}
             if report else {})
    try:
        with session_scope(engine) as s:
            do(s, ctx.obj, *args, actor=cli_actor(), **kw, **extra)
    except (TriageInputError, UnknownBreakage) as exc:
        die(str(exc))
    out.print(f"breakage {ctx.obj}: {escape(said)}", highlight=False)
    if report:
        from service.cli.runs import report_to_github

        # As `ootci run` does: what the action queued for GitHub goes out now (or, GitHub
        # unreachable, at the next drain).
        report_to_github(engine, settings)


Reason = Annotated[str, typer.Option("--reason", help="Why, for the audit log.")]


@breakage_app.command("note")
@database_outage_exits_2
def note(ctx: typer.Context,
         text: Annotated[str, typer.Argument(help="The note; \"\" clears it.")]) -> None:
    """Set the breakage's note (it replaces the one before)."""
    from service.commands.triage_actions import set_note

    _apply(ctx, "note cleared" if not text.strip() else "note set", set_note, text)


@breakage_app.command("link")
@database_outage_exits_2
def link(ctx: typer.Context,
         url: Annotated[str, typer.Argument(help="A bug's http(s) address.")]) -> None:
    """Link the breakage to a bug."""
    from service.commands.triage_actions import add_link

    _apply(ctx, f"linked {url}", add_link, url)


@breakage_app.command("snooze")
@database_outage_exits_2
def snooze(
    ctx: typer.Context,
    until: Annotated[str | None, typer.Option("--until", help="An ISO date in the future.")]
    = None,
    torch: Annotated[str | None, typer.Option(
        "--torch", help="Until a run on a newer torch than this version shows it.")] = None,
    reason: Reason = "",
) -> None:
    """Known issue: mute it (shown, not red; no label, comment or notification) until a date
    or a newer torch."""
    from service.commands.triage_actions import snooze as do

    _apply(ctx, f"snoozed until {until or 'a torch newer than ' + str(torch)}", do,
           until=until, torch=torch, reason=reason)


@breakage_app.command("dispute")
@database_outage_exits_2
def dispute(
    ctx: typer.Context,
    pr: Annotated[int, typer.Argument(help="The suspect's PR number.", min=1, max=MAX_ID)],
    reason: Annotated[str, typer.Option("--reason", help="Why it is not this PR.")],
) -> None:
    """Not this PR: the suspect is passed over for this breakage; its label comes off and
    its comment says so (sent now, through the outbox)."""
    from service.commands.triage_actions import dispute as do

    _apply(ctx, f"PR #{pr} disputed", do, pr, reason, with_report=True)


@breakage_app.command("close")
@database_outage_exits_2
def close(ctx: typer.Context, reason: Reason = "") -> None:
    """Close it by hand (it reopens by itself if it recurs)."""
    from service.commands.triage_actions import close as do

    _apply(ctx, "closed", do, reason)


@breakage_app.command("reopen")
@database_outage_exits_2
def reopen(ctx: typer.Context, reason: Reason = "") -> None:
    """Reopen a closed or resolved breakage."""
    from service.commands.triage_actions import reopen as do

    _apply(ctx, "reopened", do, reason)
