"""``ootci notify add|list|remove|drain``: who hears about a backend, and sending it."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from service.cli.common import database_outage_exits_2, die, load_settings, migrated_engine, out

notify_app = typer.Typer(help="Notifications: webhooks, email and chat per backend.",
                         no_args_is_help=True)


@notify_app.command("add")
@database_outage_exits_2
def add(
    backend: Annotated[str, typer.Argument(help="A registered backend.")],
    event: Annotated[str, typer.Option("--event", help="Comma-separated: new-breakage, "
                     "resolved, culprit-confirmed, pin-bump, run-errored.")],
    webhook: Annotated[str | None, typer.Option("--webhook", help="POST signed JSON here.")]
    = None,
    email: Annotated[str | None, typer.Option("--email", help="Mail this address "
                     "(OOTCI_SMTP_URL).")] = None,
    chat: Annotated[str | None, typer.Option("--chat", help="An incoming-webhook URL "
                    "({\"text\": ...}).")] = None,
    digest: Annotated[str | None, typer.Option("--digest", help="daily: one email a day "
                      "(with --email).")] = None,
) -> None:
    """Subscribe one receiver to BACKEND's events. A webhook's signing secret is printed
    once: the receiver checks X-Ootci-Signature (sha256=HMAC of the body) with it."""
    from service.cli.runs import cli_actor
    from service.commands.notifications import add_subscription
    from service.db import session_scope
    from service.domain.notify import NotifyInputError

    given = [(c, t) for c, t in (("webhook", webhook), ("email", email), ("chat", chat)) if t]
    if len(given) != 1:
        die("give one receiver: --webhook URL, --email ADDRESS or --chat URL")
    if digest not in (None, "daily"):
        die(f"--digest takes 'daily', not {digest!r}")
    channel, target = given[0]
    engine = migrated_engine(load_settings())
    try:
        with session_scope(engine) as s:
            made = add_subscription(s, backend, event, channel, target or "",
                                    digest=digest == "daily", actor=cli_actor())
    except NotifyInputError as exc:
        die(str(exc))
    out.print(f"subscription {made.id}: {escape(channel)} {escape(target or '')}", highlight=False)
    if made.secret:
        typer.echo(f"secret (shown once): {made.secret}")


@notify_app.command("list")
@database_outage_exits_2
def list_subscriptions(
    backend: Annotated[str | None, typer.Option("--backend", help="Only this backend.")] = None,
) -> None:
    """The subscriptions (never their secrets)."""
    from service.db import session_scope
    from service.queries.subscriptions import subscriptions

    engine = migrated_engine(load_settings())
    with session_scope(engine) as s:
        rows = subscriptions(s, backend)
    table = Table("id", "backend", "events", "channel", "target", "digest")
    for r in rows:
        table.add_row(str(r.id), escape(r.backend), ",".join(r.events), r.channel,
                      escape(r.target), "daily" if r.digest else "-")
    out.print(table)


@notify_app.command("remove")
@database_outage_exits_2
def remove(subscription: Annotated[int, typer.Argument(help="A subscription's id.")]) -> None:
    """Remove a subscription; its unsent notifications are dropped when next due."""
    from service.cli.runs import cli_actor
    from service.commands.notifications import remove_subscription
    from service.db import session_scope
    from service.domain.notify import NotifyInputError

    engine = migrated_engine(load_settings())
    try:
        with session_scope(engine) as s:
            remove_subscription(s, subscription, actor=cli_actor())
    except NotifyInputError as exc:
        die(str(exc))
    out.print(f"removed subscription {subscription}", highlight=False)


@notify_app.command("drain")
@database_outage_exits_2
def drain() -> None:
    """Send the due notifications and vendor commit statuses now (the worker does every
    two minutes)."""
    from sqlalchemy.orm import Session

    from service.github.client import GitHubClient
    from service.github.vendor_status import drain as drain_vendor_statuses
    from service.notify.drain import drain as send

    settings = load_settings()
    engine = migrated_engine(settings)
    result = send(lambda: Session(engine), settings)
    vendor = drain_vendor_statuses(lambda: Session(engine), GitHubClient.from_settings(settings),
                                   can_write=bool(settings.github_token.get_secret_value()))
    out.print(f"sent {result.sent}, retried {result.retried}, failed {result.failed}; "
              f"vendor commit statuses: sent {vendor.sent}, retried {vendor.retried}, "
              f"failed {vendor.failed}", highlight=False)
    for error in [*result.errors, *vendor.errors][-5:]:
        out.print(f"  {escape(error)}", highlight=False)
