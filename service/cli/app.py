"""The ``ootci`` Typer app: every command mounted in one place, in the order ``--help`` shows."""

from __future__ import annotations

import typer

from service.cli import backends, corpus, culprit, ops, pins, recipes, resume, runs

EXTRA_ARGS = {"allow_extra_args": True, "ignore_unknown_options": True}

app = typer.Typer(
    name="ootci",
    help="Nightly upstream-compatibility CI for PyTorch's PrivateUse1 backends.",
    no_args_is_help=True,
    add_completion=False,
)
app.command()(recipes.init)
app.add_typer(recipes.recipe_app, name="recipe")
app.command()(ops.migrate)
app.command()(runs.run)
app.command()(runs.rerun)
app.command()(resume.resume)
app.command("runs")(runs.list_runs)
app.command()(runs.show)
app.command()(ops.reclassify)
app.command()(culprit.culprit)
app.command()(culprit.report)
app.command()(ops.gc)
app.command()(ops.serve)
app.command(context_settings=EXTRA_ARGS)(ops.worker)
app.command(context_settings=EXTRA_ARGS)(ops.beat)
app.add_typer(corpus.mutants_app, name="mutants")
app.command("corpus")(corpus.corpus)
app.add_typer(pins.pins_app, name="pins")
app.add_typer(backends.backend_app, name="backend")


def main() -> None:
    app()
