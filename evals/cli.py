"""``python -m evals``: the evaluators on the command line.

    python -m evals classifier [--live] [--only NAME ...] [--logs DIR] [--json]
    python -m evals culprit [--cases DIR] [--json]
    python -m evals culprit-verify [--cases DIR] [--top N] [--json]
    python -m evals mutants list [--json]
    python -m evals mutants apply NAME --out DIR [--torch-dir DIR] [--json]

Exit codes as ``ootci``'s (``service/cli/common.py``): 0 fine, 1 the evaluator found
mistakes (the classifier below 100 %, a culprit case missed), 2 bad input.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from evals.classifier.report import CaseResult, accuracy, confusion, summary
from evals.mutants import catalogue
from evals.mutants.edits import MutantError
from evals.mutants.mutant import Mutant
from evals.paths import CULPRIT_CASES, MUTANT_LOGS
from service.cli.common import (
    BUNDLED_BACKEND,
    EXIT_FAILED,
    console,
    die,
    load_settings,
    migrated_engine,
    out,
    print_json,
)

app = typer.Typer(
    name="evals",
    help="ootci's evaluators: score the classifier and culprit ranking on their corpora.",
    no_args_is_help=True,
    add_completion=False,
)
mutants_app = typer.Typer(help="The mutant catalogue: patched torch installs that break the "
                          "PrivateUse1 path the way upstream changes do.",
                          no_args_is_help=True, add_completion=False)
app.add_typer(mutants_app, name="mutants")


@mutants_app.command("list")
def list_mutants(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Every mutant: what it imitates, the upstream PR, the verdict and capture it must get."""
    if as_json:
        rows = [
            {"name": m.name, "imitates": m.imitates, "pr": m.pr, "pr_url": m.pr_url,
             "stage": m.expect.stage.value, "category": m.expect.category.value,
             "subtype": m.expect.subtype.value, "captures": dict(m.expect.captures),
             "files": list(m.touched)}
            for m in catalogue.MUTANTS
        ]
        print_json(rows)
        return
    table = Table(title=f"{len(catalogue.MUTANTS)} mutants", show_lines=True)
    for col in ("name", "imitates", "upstream PR", "expected", "expected capture"):
        table.add_column(col, overflow="fold")
    for m in catalogue.MUTANTS:
        e = m.expect
        captures = ", ".join(f"{k} ~ /{v}/" for k, v in e.captures.items())
        table.add_row(m.name, m.imitates, f"#{m.pr}" if m.pr else "-",
                      f"{e.stage.value}: {e.category.value}/{e.subtype.value}", captures)
    out.print(table)


@mutants_app.command("apply")
def apply_mutant(
    name: Annotated[str, typer.Argument(help="Mutant name (see `python -m evals mutants list`).")],
    out_dir: Annotated[Path, typer.Option("--out", help="New or empty dir for the overlay.")],
    torch_dir: Annotated[
        Path | None,
        typer.Option("--torch-dir", help="The torch install to mutate (default: this "
                     "interpreter's torch)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Make an overlay of the torch install with NAME applied; print its `path:` spec."""
    from evals.mutants.overlay import build_overlay, installed_torch_dir

    try:
        mutant = catalogue.get(name)
        overlay = build_overlay(torch_dir or installed_torch_dir(), out_dir, mutant)
    except MutantError as exc:
        die(str(exc))
    if as_json:
        print_json(overlay.to_dict())
        return
    console.print(f"{mutant.name}: {overlay.linked} hard links, {overlay.symlinked} symlinks, "
                  f"patched {', '.join(overlay.patched) or '-'}"
                  + (f", removed {', '.join(overlay.removed)}" if overlay.removed else ""),
                  highlight=False)
    console.print(f"run it with: ootci run --torch {overlay.spec}", highlight=False)
    out.print(overlay.spec, highlight=False)


def _print_results(results: list[CaseResult], elapsed_s: float, mode: str) -> None:
    table = Table(title=f"corpus ({mode})")
    for col in ("mutant", "expected", "got", "rule", "captures", "time", "run"):
        table.add_column(col, overflow="fold")
    for r in results:
        e = r.mutant.expect
        got = f"{r.got.category}/{r.got.subtype}" if r.got else f"[yellow]{r.error}[/]"
        colour = "green" if r.verdict_ok else "red"
        problems = r.capture_problems
        caps = ("[green]ok[/] " if not problems else "[red]" + "; ".join(problems) + "[/] ") + \
            (", ".join(f"{k}={v}" for k, v in r.got.captures.items() if k in e.captures)
             if r.got else "")
        table.add_row(r.mutant.name, f"{e.category.value}/{e.subtype.value}",
                      f"[{colour}]{got}[/]", r.got.rule if r.got else "-", caps,
                      f"{r.duration_s:.0f}s" if r.duration_s >= 1 else f"{r.duration_s:.2f}s",
                      str(r.run_id or "-"))
    out.print(table)
    matrix = confusion(results)
    got_cols = sorted({g for row in matrix.values() for g in row})
    conf = Table(title="confusion (rows: expected subtype, columns: classifier's subtype)")
    conf.add_column("expected")
    for g in got_cols:
        conf.add_column(g)
    for expected, row in sorted(matrix.items()):
        conf.add_row(expected, *[
            (f"[green]{row[g]}[/]" if g == expected else f"[red]{row[g]}[/]") if row[g] else "."
            for g in got_cols
        ])
    out.print(conf)
    for r in results:
        for note in r.notes:
            console.print(f"{r.mutant.name}: {note}", highlight=False)
    right = sum(r.correct for r in results)
    out.print(f"accuracy {accuracy(results):.1%} ({right}/{len(results)} mutants with the "
              f"right category, subtype and captures) in {elapsed_s:.1f} s", highlight=False)


@app.command()
def classifier(
    live: Annotated[bool, typer.Option("--live", help="Run every mutant through the real "
                                       "pipeline (builds + tests; tens of minutes).")] = False,
    only: Annotated[list[str] | None, typer.Option("--only", help="Only this mutant "
                                                   "(repeatable).")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    logs: Annotated[Path, typer.Option("--logs", help="The golden logs: <mutant>.log each.")]
    = MUTANT_LOGS,
    save_fixtures: Annotated[bool, typer.Option(
        "--save-fixtures", help="With --live: write each run's decisive excerpt to "
        "<logs>/<name>.log.")] = False,
    backend: Annotated[Path, typer.Option("--backend", "-b", help="Backend source dir.")]
    = BUNDLED_BACKEND,
    keep: Annotated[bool, typer.Option("--keep", help="Keep overlays, venvs and build dirs "
                                       "(printed) for inspection.")] = False,
    baseline: Annotated[bool, typer.Option(help="With --live: run the unpatched torch first "
                                           "and ignore tests that fail there too.")] = True,
) -> None:
    """Score the classifier on the mutant corpus: golden logs (default) or live runs."""
    from evals.classifier import runner

    try:
        mutants = catalogue.select(only)
    except MutantError as exc:
        die(str(exc))
    if save_fixtures and not live:
        die("--save-fixtures needs --live (fixtures are excerpts of live runs)")
    started = time.perf_counter()
    if not live:
        results = runner.classify_goldens(mutants, logs)
    else:
        results = _live(mutants, backend, logs if save_fixtures else None, keep, baseline,
                        quiet=as_json)
    elapsed = time.perf_counter() - started
    mode = "live" if live else "golden logs"
    if as_json:
        print_json(summary(results, elapsed, mode))
    else:
        _print_results(results, elapsed, mode)
    if accuracy(results) < 1.0:
        raise typer.Exit(EXIT_FAILED)


def _live(mutants: list[Mutant], backend: Path, save: Path | None, keep: bool, baseline: bool,
          *, quiet: bool) -> list[CaseResult]:
    from evals.classifier import runner
    from evals.mutants.overlay import installed_torch_dir
    from workers.pipeline.errors import UsageError
    from workers.pipeline.steps.recipe import load_recipe

    settings = load_settings()
    try:
        load_recipe(backend.resolve())
        torch_dir = installed_torch_dir()
    except (UsageError, MutantError) as exc:
        die(str(exc))
    engine = migrated_engine(settings)
    work_root = Path(tempfile.mkdtemp(prefix="ootci-corpus-"))
    if keep:
        console.print(f"keeping overlays, venvs and build dirs under {work_root}")

    def progress(message: str) -> None:
        if not quiet:
            console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {message}", highlight=False)

    cfg = runner.LiveConfig(engine=engine, settings=settings, backend_dir=backend.resolve(),
                            torch_dir=torch_dir, work_root=work_root,
                            save_fixtures=save, keep=keep,
                            baseline=baseline, progress=progress)
    try:
        results, _ = runner.run_live(cfg, mutants)
    except MutantError as exc:
        die(str(exc))
    finally:
        if not keep:
            import shutil

            shutil.rmtree(work_root, ignore_errors=True)
    return results


@app.command()
def culprit(
    cases: Annotated[Path, typer.Option("--cases", help="The culprit corpus: <case>.json "
                                        "each.")] = CULPRIT_CASES,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Score culprit ranking on the culprit corpus: top-1 / top-3 and the misses."""
    from evals.culprit import run_corpus

    if not cases.is_dir():
        die(f"{cases} is not a directory of culprit cases")
    report = run_corpus(cases)
    if as_json:
        print_json({
            "top1": report.top1, "top3": report.top3,
            "cases": [{"case": r.case.name, "expected_pr": r.case.expected_pr, "rank": r.rank,
                       "top_score": r.top_score, "confidence": r.ranking.confidence.value}
                      for r in report.results],
        })
    else:
        out.print(escape(report.render()))
    if report.misses:
        raise typer.Exit(EXIT_FAILED)


@app.command("culprit-verify")
def culprit_verify(
    cases: Annotated[Path, typer.Option("--cases", help="The culprit corpus: <case>.json "
                                        "each.")] = CULPRIT_CASES,
    top: Annotated[int, typer.Option("--top", min=1, help="Suspects verified per case.")] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Verify the top suspects of each mutant-backed culprit case by undoing them in an
    overlay of the mutant torch: every culprit confirmed, no decoy ever (exit 1 otherwise)."""
    from evals.culprit_verify import evaluate

    if not cases.is_dir():
        die(f"{cases} is not a directory of culprit cases")
    report = evaluate(cases.glob("*.json"), top)
    if as_json:
        print_json({
            "culprits": report.culprits, "culprits_confirmed": report.culprits_confirmed,
            "decoys_confirmed": report.decoys_confirmed,
            "answers": [{"case": a.case, "sha": a.sha, "pr": a.pr, "culprit": a.culprit,
                         "state": a.state.value, "why": a.why} for a in report.answers],
        })
    else:
        out.print(escape(report.render()))
    if report.decoys_confirmed or report.culprits_confirmed < report.culprits:
        raise typer.Exit(EXIT_FAILED)


def main() -> None:
    app()
