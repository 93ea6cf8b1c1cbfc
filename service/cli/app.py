"""The ``ootci`` Typer app: every command mounted in one place, in the order ``--help`` shows.

Help is plain text (``rich_markup_mode=None``): paragraphs rewrapped to the terminal, never
broken mid-sentence, no ``<bool>`` metavars, brackets such as ``[pins]`` shown literally.
Each command's example is its epilog here, so every ``--help`` ends with one.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Annotated

import typer

from service.cli import (
    backends,
    culprit,
    flaky,
    notify,
    ops,
    pins,
    recipes,
    resume,
    runs,
    tokens,
    triage,
)
from service.cli.bisect import bisect

EXTRA_ARGS = {"allow_extra_args": True, "ignore_unknown_options": True}
PLAIN = {"rich_markup_mode": None, "pretty_exceptions_enable": False}

app = typer.Typer(
    name="ootci",
    help="Nightly upstream-compatibility CI for PyTorch's PrivateUse1 backends. "
    "Start with `ootci init DIR`, `ootci recipe check DIR` and `ootci run --backend DIR`.",
    no_args_is_help=True,
    add_completion=False,
    **PLAIN,  # type: ignore[arg-type]
)


def _example(*lines: str) -> str:
    return "Example: " + "  |  ".join(lines)


def _version(value: bool) -> None:
    if value:
        try:
            typer.echo(f"ootci {version('ootci')}")
        except PackageNotFoundError:
            typer.echo("ootci (not installed: run from a source tree)")
        raise typer.Exit()


@app.callback()
def main_options(
    _show_version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True,
                           help="Print ootci's version and exit.")
    ] = False,
) -> None:
    """Nightly upstream-compatibility CI for PyTorch's PrivateUse1 backends."""
    # Before any command reads settings: secrets out of the environment (docs/security.md).
    from service.secrets import SecretsError, load_and_scrub

    try:
        load_and_scrub()
    except SecretsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


app.command(epilog=_example("ootci init ../torch-acme"))(recipes.init)
app.add_typer(recipes.recipe_app, name="recipe")
app.command(epilog=_example("ootci migrate"))(ops.migrate)
app.command(epilog=_example("ootci run --backend ../torch-acme --torch pip:torch==2.13.0",
                            "ootci run --torch nightly --json"))(runs.run)
app.command(epilog=_example("ootci rerun 12"))(runs.rerun)
app.command(epilog=_example("ootci resume"))(resume.resume)
app.command("runs", epilog=_example("ootci runs --backend acme --state failed"))(runs.list_runs)
app.command(epilog=_example("ootci show 12 --log-lines 100"))(runs.show)
app.command(epilog=_example("ootci reclassify --json"))(ops.reclassify)
app.command(epilog=_example("ootci culprit 12", "ootci culprit 12 --json"))(culprit.culprit)
app.command(epilog=_example("ootci report 3 --dry-run"))(culprit.report)
app.command(epilog=_example("ootci bisect", "ootci bisect 3 --json"))(bisect)
app.command(epilog=_example("ootci gc --dry-run"))(ops.gc)
app.command("reindex-logs", epilog=_example("ootci reindex-logs"))(ops.reindex_logs)
app.command(epilog=_example("ootci serve --port 8000"))(ops.serve)
app.command(context_settings=EXTRA_ARGS, epilog=_example("ootci worker --concurrency 1"))(ops.worker)
app.command(context_settings=EXTRA_ARGS, epilog=_example("ootci beat"))(ops.beat)
app.add_typer(pins.pins_app, name="pins")
app.add_typer(backends.backend_app, name="backend")
app.add_typer(tokens.token_app, name="token",
              epilog=_example("ootci token add alice --role triager", "ootci token revoke alice"))
app.add_typer(notify.notify_app, name="notify",
              epilog=_example("ootci notify add acme --event new-breakage,resolved "
                              "--email ci@acme.example --digest daily"))
app.add_typer(flaky.flaky_app, name="flaky",
              epilog=_example("ootci flaky quarantine acme tests/test_ops.py::test_add"))
app.add_typer(triage.breakage_app, name="breakage",
              epilog=_example('ootci breakage 7 snooze --until 2026-12-31 --reason "known"',
                              'ootci breakage 7 dispute 120969 --reason "touches docs only"'))


def main() -> None:
    app()
