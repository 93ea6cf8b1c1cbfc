"""What every ``ootci`` command shares: the consoles, the exit codes, the one ``die``, and the
settings and migrated engine a command starts from.

Exit codes: 0 all green, 1 a run failed (the backend or upstream broke), 2 bad input or
infrastructure trouble (nothing half-written).
"""

from __future__ import annotations

import functools
import json
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from service.config import Settings

console = Console(stderr=True)
# Piped output (CI logs) gets a wide table instead of rich's 80-column default.
out = Console() if sys.stdout.isatty() else Console(width=160)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
REPO_ROOT = Path(__file__).resolve().parents[2]
BUNDLED_BACKEND = REPO_ROOT / "backend"


def die(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print MESSAGE as an error and exit with CODE (2: bad input or infrastructure)."""
    # The message quotes user input and tool output: never read it as rich markup.
    console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


P = ParamSpec("P")
R = TypeVar("R")


def database_outage_exits_2(command: Callable[P, R]) -> Callable[P, R]:
    """The database lost mid-command (a failover, a restart): one line and exit 2, not a
    traceback. Outages the pipeline can wait out never get here."""

    @functools.wraps(command)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        from sqlalchemy.exc import DBAPIError, OperationalError

        from service.db import DatabaseUnavailable

        try:
            return command(*args, **kwargs)
        except DatabaseUnavailable as exc:
            die(str(exc))
        except DBAPIError as exc:
            if not (isinstance(exc, OperationalError) or exc.connection_invalidated):
                raise
            first = str(exc.orig or exc).strip().splitlines()
            die(f"database unavailable: {first[0] if first else type(exc).__name__}")

    return guarded


def print_json(document: object) -> None:
    """A JSON document on stdout (pretty on a terminal, one parseable text either way)."""
    out.print_json(json.dumps(document))


def load_settings() -> Settings:
    from service.config import SettingsError, get_settings

    try:
        return get_settings()
    except SettingsError as exc:
        die(str(exc))


# ``ootci run``/``rerun``/``resume``: the one way to run a backend's code unsealed.
NO_SANDBOX_HELP = ("Run the backend's build and tests without the sandbox (as OOTCI_SANDBOX=off): "
                   "its code gets this process's rights; the run is marked unsandboxed.")


def sealed_or_die(settings: Settings, no_sandbox: bool = False) -> Settings:
    """The settings a command runs backends with: exit 2 before anything is written when no
    working sandbox can be made and the operator did not opt out (``--no-sandbox``)."""
    from workers.pipeline.isolation.policy import refusal

    if no_sandbox:
        settings = settings.model_copy(update={"sandbox": False})
    reason = refusal(settings)
    if reason is not None:
        die(reason)
    if not settings.sandbox:
        console.print("[yellow]warning:[/] the sandbox is off: the backend's build and tests run "
                      "with this process's rights, and its runs are marked unsandboxed")
    return settings


def migrated_engine(settings: Settings) -> Engine:
    """A migrated engine, or exit 2 with the reason the database is unusable."""
    from service.db import DatabaseUnavailable, check_connection, get_engine
    from service.migrate import at_head, upgrade

    engine = get_engine(settings.resolved_database_url)
    try:
        check_connection(engine)
        if not at_head(engine):  # alembic only when there is something to migrate
            upgrade(engine)
    except DatabaseUnavailable as exc:
        die(str(exc))
    return engine


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"
