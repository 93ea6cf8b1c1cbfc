"""``ootci token add|list|revoke``: the named tokens the API and the dashboard accept.

Made here, on the server's database, by whoever may run ``ootci`` there (the audit log
names them ``cli:user@host``). A token is printed once; only its sha256 is kept.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from service.cli.common import database_outage_exits_2, die, load_settings, migrated_engine, out

token_app = typer.Typer(help="Named API tokens with a role (viewer, triager, admin).",
                        no_args_is_help=True)


@token_app.command("add")
@database_outage_exits_2
def add(
    name: Annotated[str, typer.Argument(help="Who the token is for (the audit log's name).")],
    role: Annotated[str, typer.Option("--role", help="viewer, triager or admin.")] = "viewer",
) -> None:
    """Make a token NAME with ROLE and print it: the only time it is shown."""
    from service.cli.runs import cli_actor
    from service.commands.tokens import TokenError, add_token
    from service.db import session_scope

    engine = migrated_engine(load_settings())
    try:
        with session_scope(engine) as s:
            made = add_token(s, name, role, actor=cli_actor())
    except TokenError as exc:
        die(str(exc))
    typer.echo(made.secret)
    typer.echo(f"token {made.name} ({made.role.value}): shown once, store it now", err=True)


@token_app.command("list")
@database_outage_exits_2
def list_tokens() -> None:
    """The named tokens: name, role, who made them, revoked or not (never the tokens)."""
    from service.db import session_scope
    from service.queries.audit import tokens

    engine = migrated_engine(load_settings())
    with session_scope(engine) as s:
        rows = tokens(s)
    table = Table("name", "role", "created by", "created", "revoked")
    for t in rows:
        table.add_row(escape(t.name), t.role, escape(t.created_by),
                      t.created_at.strftime("%Y-%m-%d %H:%M"),
                      t.revoked_at.strftime("%Y-%m-%d %H:%M") if t.revoked_at else "-")
    out.print(table)


@token_app.command("revoke")
@database_outage_exits_2
def revoke(name: Annotated[str, typer.Argument(help="A token's name.")]) -> None:
    """Revoke token NAME: it and its dashboard sessions stop working at once."""
    from service.cli.runs import cli_actor
    from service.commands.tokens import TokenError, revoke_token
    from service.db import session_scope

    engine = migrated_engine(load_settings())
    try:
        with session_scope(engine) as s:
            revoke_token(s, name, actor=cli_actor())
    except TokenError as exc:
        die(str(exc))
    out.print(f"revoked {escape(name)}", highlight=False)
