"""``ootci``: the command line, and the composition root (it may wire service and workers).

Exit codes: 0 all green, 1 a run failed (the backend or upstream broke), 2 bad input or
infrastructure trouble (nothing half-written).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from service.cli_corpus import corpus_app, mutants_app

app = typer.Typer(
    name="ootci",
    help="Nightly upstream-compatibility CI for PyTorch's PrivateUse1 backends.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console(stderr=True)
# Piped output (CI logs) gets a wide table instead of rich's 80-column default.
out = Console() if sys.stdout.isatty() else Console(width=160)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
REPO_ROOT = Path(__file__).resolve().parent.parent
BUNDLED_BACKEND = REPO_ROOT / "backend"


def _die(message: str, code: int = EXIT_USAGE) -> NoReturn:
    # The message quotes user input and tool output: never read it as rich markup.
    console.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code)


def _settings() -> Any:
    from service.config import SettingsError, get_settings

    try:
        return get_settings()
    except SettingsError as exc:
        _die(str(exc))


def _engine(settings: Any) -> Any:
    """A migrated engine, or exit 2 with the reason the database is unusable."""
    from service.db import DatabaseUnavailable, check_connection, get_engine
    from service.migrate import upgrade

    engine = get_engine(settings.resolved_database_url)
    try:
        check_connection(engine)
        upgrade(engine)
    except DatabaseUnavailable as exc:
        _die(str(exc))
    return engine


def _worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@app.command()
def migrate() -> None:
    """Create or upgrade the database schema."""
    settings = _settings()
    _engine(settings)
    console.print(f"database at head: {settings.resolved_database_url}")


@app.command()
def run(
    torch: Annotated[
        list[str] | None,
        typer.Option("--torch", "-t", help="Torch spec (repeatable): installed, pip:REQ, "
                     "wheel:PATH|URL, path:DIR, nightly. Default: OOTCI_DEFAULT_TORCH."),
    ] = None,
    backend: Annotated[
        Path, typer.Option("--backend", "-b", help="Backend source dir with an ootci.toml.")
    ] = BUNDLED_BACKEND,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
    trigger: Annotated[str, typer.Option(hidden=True)] = "cli",
) -> None:
    """Build BACKEND against each torch spec, run its contract suite, store and show verdicts."""
    from service.db import session_scope
    from service.models import Run, RunState
    from service.runs import create_run, get_or_create_backend
    from workers.pipeline.provision import parse_spec
    from workers.pipeline.recipe import load_recipe
    from workers.pipeline.types import UsageError

    settings = _settings()
    specs = torch or [settings.default_torch]
    # Validate everything the user typed before writing a single row.
    try:
        for spec in specs:
            parse_spec(spec, nightly_index_url=settings.nightly_index_url,
                       pip_index_url=settings.pip_index_url)
        recipe = load_recipe(backend.resolve())
    except UsageError as exc:
        _die(str(exc))
    engine = _engine(settings)

    with session_scope(engine) as s:
        be = get_or_create_backend(s, recipe.name, str(backend.resolve()))
        run_ids = [create_run(s, be, spec, trigger=trigger).id for spec in specs]
        backend_name = be.name

    results: list[dict[str, Any]] = []
    code = EXIT_OK
    for run_id in run_ids:
        state = _execute_with_progress(engine, settings, run_id, as_json)
        usage_error = None
        with session_scope(engine) as s:
            run_row = s.get_one(Run, run_id)
            if state == RunState.ERRORED and (run_row.error or "").startswith("usage error"):
                # The user's input was wrong (say, a pip requirement that does not exist):
                # report it and keep no half-made run.
                usage_error = (run_row.error or "").removeprefix("usage error: ")
                s.delete(run_row)
            else:
                results.append(_run_dict(run_row, backend_name))
        if usage_error is not None:
            # Nothing half-written: the runs this command queued after it go too.
            with session_scope(engine) as s:
                for later in run_ids[run_ids.index(run_id) + 1 :]:
                    s.delete(s.get_one(Run, later))
            _die(usage_error)
        code = max(code, _exit_code(state))

    if as_json:
        out.print_json(json.dumps(results if len(results) > 1 else results[0]))
    else:
        _print_summary(results)
    raise typer.Exit(code)


@app.command()
def rerun(
    run_id: Annotated[int, typer.Argument(help="A failed or errored run.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Rerun a failed run's failed tests (the whole suite if it failed before its tests:
    a build) against the same torch spec, and show the verdict."""
    from service.db import session_scope
    from service.models import Backend, Run
    from service.runs import plan_rerun

    settings = _settings()
    engine = _engine(settings)
    with session_scope(engine) as s:
        old = _run_or_die(s, run_id)
        new_id = plan_rerun(s, run_id)
        if new_id is None:
            _die(f"run {run_id} is {old.state}: only a failed or errored run can be rerun")
        backend_name = s.get_one(Backend, old.backend_id).name

    state = _execute_with_progress(engine, settings, new_id, as_json)
    with session_scope(engine) as s:
        result = _run_dict(s.get_one(Run, new_id), backend_name)
    if as_json:
        out.print_json(json.dumps(result))
    else:
        _print_summary([result])
    raise typer.Exit(_exit_code(state))


def _run_or_die(session: Any, run_id: int) -> Any:
    from service.models import Run

    run_row = session.get(Run, run_id)
    if run_row is None:
        _die(f"no run {run_id}")
    return run_row


def _execute_with_progress(engine: Any, settings: Any, run_id: int, as_json: bool) -> str | None:
    from service.progress import RunProgress
    from workers.pipeline.execute import execute_run

    with RunProgress(console, run_id, enabled=not as_json) as progress:
        return execute_run(engine, settings, run_id, _worker_id(), on_event=progress.on_event)


def _exit_code(state: str | None) -> int:
    from service.models import RunState

    if state == RunState.PASSED:
        return EXIT_OK
    return EXIT_USAGE if state == RunState.ERRORED else EXIT_FAILED


def _run_dict(run_row: Any, backend_name: str) -> dict[str, Any]:
    from service.serialize import run_to_dict

    return run_to_dict(run_row, backend_name=backend_name)


def _print_summary(results: list[dict[str, Any]]) -> None:
    table = Table(title="ootci runs")
    for col in ("run", "backend", "torch", "state", "verdict", "tests", "first failure"):
        table.add_column(col)
    for r in results:
        tests = ", ".join(f"{n} {k}" for k, n in sorted(r["tests"].items())) or "-"
        first = r["failures"][0] if r["failures"] else None
        first_text = (
            f"[{first['subtype'] or first['category']}] {first['line'][:90]}" if first else "-"
        )
        verdict = r["verdict"]["category"] or "-"
        if r["verdict"]["subtype"]:
            verdict += f"/{r['verdict']['subtype']}"
        colour = {"passed": "green", "failed": "red"}.get(r["state"], "yellow")
        torch_label = r["torch"]["version"] or r["torch"]["spec"]
        table.add_row(str(r["id"]), r["backend"] or "-", torch_label,
                      f"[{colour}]{r['state']}[/]", verdict, tests, first_text)
    out.print(table)
    for r in results:
        if r["error"]:
            out.print(f"run {r['id']}: [yellow]{r['error']}[/]")


@app.command("runs")
def list_runs(
    backend: Annotated[str | None, typer.Option(help="Only this backend (name).")] = None,
    state: Annotated[str | None, typer.Option(help="queued|running|passed|failed|errored")] = None,
    torch: Annotated[str | None, typer.Option(help="Only runs whose torch spec contains this.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 20,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List recent runs, newest first."""
    from sqlalchemy import select

    from service.db import session_scope
    from service.models import Backend, Run, RunState
    from service.serialize import run_to_dict

    if state and state not in set(RunState):
        _die(f"unknown state {state!r}: expected one of {', '.join(RunState)}")
    settings = _settings()
    engine = _engine(settings)
    with session_scope(engine) as s:
        query = select(Run, Backend.name).join(Backend).order_by(Run.id.desc()).limit(limit)
        if backend:
            query = query.where(Backend.name == backend)
        if state:
            query = query.where(Run.state == state)
        if torch:
            query = query.where(Run.torch_spec.contains(torch))
        rows = [run_to_dict(r, backend_name=name, details=False) for r, name in s.execute(query)]
    if as_json:
        out.print_json(json.dumps(rows))
        return
    table = Table(title=f"last {limit} runs")
    for col in ("run", "backend", "torch", "state", "verdict", "created", "duration"):
        table.add_column(col)
    for r in rows:
        dur = f"{r['duration_s']:.0f}s" if r["duration_s"] else "-"
        table.add_row(str(r["id"]), r["backend"], r["torch"]["version"] or r["torch"]["spec"],
                      r["state"], r["verdict"]["category"] or "-", r["created_at"][:19], dur)
    out.print(table)


@app.command()
def show(
    run_id: Annotated[int, typer.Argument(help="Run id.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
    log_lines: Annotated[int, typer.Option(help="Log tail lines per failed step.")] = 30,
) -> None:
    """Show one run: steps, failures with their evidence, and the failing step's log tail."""
    from service.db import session_scope
    from service.models import Backend
    from service.serialize import run_to_dict

    settings = _settings()
    engine = _engine(settings)
    with session_scope(engine) as s:
        run_row = _run_or_die(s, run_id)
        data = run_to_dict(run_row, backend_name=s.get_one(Backend, run_row.backend_id).name)
        tails = {
            st.name: st.read_log().decode("utf-8", "replace").splitlines()[-log_lines:]
            for st in run_row.steps
            if st.status not in ("passed", "skipped")
        }
    if as_json:
        out.print_json(json.dumps(data))
        return
    out.print(f"[bold]run {data['id']}[/]  {data['backend']} @ {data['backend_sha']}  "
              f"torch {data['torch']['version'] or data['torch']['spec']} "
              f"({data['torch']['git_version'] or '?'})  state [bold]{data['state']}[/]")
    v = data["verdict"]
    if v["category"]:
        out.print(f"verdict: {v['category']}/{v['subtype'] or '-'} — {v['reason'] or ''}")
    steps = Table(title="steps")
    for col in ("step", "status", "duration", "summary"):
        steps.add_column(col)
    for st in data["steps"]:
        dur = f"{st['duration_s']:.1f}s" if st["duration_s"] is not None else "-"
        steps.add_row(st["name"], st["status"], dur, (st["summary"] or "")[:100])
    out.print(steps)
    # One entry per fingerprint: ten parametrisations of one break are one thing to read.
    groups: dict[str, list[dict[str, Any]]] = {}
    for f in data["failures"]:
        groups.setdefault(f["fingerprint"] or f"#{f['id']}", []).append(f)
    for group in groups.values():
        f = group[0]
        more = f" (+{len(group) - 1} more)" if len(group) > 1 else ""
        out.print(f"[red]✗[/] {f['stage']} {f['nodeid'] or ''}{more} "
                  f"[{f['category']}/{f['subtype']}] rule={f['rule']} triage={f['triage']}",
                  highlight=False)
        line = f["line"] if len(f["line"]) <= 300 else f["line"][:300] + " …"
        where = f"line {f['line_number']}: " if f["line_number"] else ""
        out.print(f"    {where}{line}", markup=False, highlight=False)
        if f["captures"]:
            out.print(f"    captures: {f['captures']}", markup=False)
    for name, lines in tails.items():
        out.rule(f"{name} log (last {len(lines)} lines)")
        out.print("\n".join(lines), markup=False, highlight=False)


@app.command()
def reclassify(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Re-run classification, triage and breakage grouping over every stored run (after a
    rules.toml or fingerprint change)."""
    from dataclasses import asdict

    from service.db import session_scope
    from workers.pipeline.reclassify import reclassify as replay

    settings = _settings()
    engine = _engine(settings)
    with session_scope(engine) as s:
        report = replay(s, settings)
    if as_json:
        out.print_json(json.dumps(asdict(report)))
    else:
        out.print(
            f"reclassified {report.runs} runs: {report.failures_after} failures "
            f"({report.changed} changed), breakages {report.breakages_before} -> "
            f"{report.breakages_after}"
        )


@app.command()
def gc(
    max_age_days: Annotated[
        int | None, typer.Option(help="Remove what was unused this long (default OOTCI_CACHE_MAX_AGE_DAYS).")
    ] = None,
    keep: Annotated[
        int | None, typer.Option(help="Keep this many most recently used of each kind (default OOTCI_CACHE_KEEP).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would go; remove nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Remove torch environments and build dirs of the cache that have not been used for a
    while (every run also does this before it provisions)."""
    from workers.pipeline.cache_gc import collect_garbage_per_settings

    try:
        report = collect_garbage_per_settings(
            _settings(), max_age_days=max_age_days, keep=keep, dry_run=dry_run
        )
    except ValueError as exc:
        _die(str(exc))
    if as_json:
        out.print_json(
            json.dumps(
                {
                    "dry_run": dry_run,
                    "freed_bytes": report.freed_bytes,
                    "kept": report.kept,
                    "skipped_busy": [str(p) for p in report.skipped_busy],
                    "removed": [
                        {"path": str(r.path), "kind": r.kind, "size_bytes": r.size_bytes}
                        for r in report.removed
                    ],
                }
            )
        )
        return
    verb = "would remove" if dry_run else "removed"
    for r in report.removed:
        out.print(f"{verb} {r.kind} {escape(str(r.path))} ({r.size_bytes / 1e6:.0f} MB)")
    out.print(
        f"{verb} {len(report.removed)} entries, {report.freed_bytes / 1e9:.2f} GB; kept {report.kept}"
        + (f"; {len(report.skipped_busy)} busy, skipped" if report.skipped_busy else "")
    )


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8000,
) -> None:
    """Serve the dashboard, JSON API and webhooks. Without a broker, queued runs execute
    in this process (the embedded default)."""
    from service.api.app import serve as serve_app
    from service.dispatch import CeleryDispatcher, InProcessDispatcher
    from workers.pipeline.execute import execute_run

    settings = _settings()
    engine = _engine(settings)
    if settings.in_process:
        dispatcher: Any = InProcessDispatcher(
            lambda run_id: execute_run(engine, settings, run_id, _worker_id())
        )
        # Embedded mode has no sweeper: runs left queued (or orphaned mid-run) by the
        # previous stop are picked up now rather than never.
        from service.db import session_scope
        from service.runs import stale_run_ids

        with session_scope(engine) as s:
            leftovers = stale_run_ids(s, queued_older_than_s=0)
        for run_id in leftovers:
            dispatcher.enqueue_run(run_id)
        if leftovers:
            console.print(f"resuming {len(leftovers)} run(s) left from the last stop: {leftovers}")
    else:
        dispatcher = CeleryDispatcher(settings.broker_url)
    console.print(f"ootci serving on http://{host}:{port}/ (database {settings.resolved_database_url})")
    serve_app(settings, host, port, dispatcher=dispatcher, engine=engine)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def worker(ctx: typer.Context) -> None:
    """Run a Celery worker (extra arguments go to `celery worker`). Needs OOTCI_BROKER_URL."""
    settings = _settings()
    if settings.in_process:
        _die("OOTCI_BROKER_URL is not set: a worker needs a broker (e.g. redis://127.0.0.1:6379/0)")
    _engine(settings)
    from workers.celery_app import run_worker

    run_worker(ctx.args)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def beat(ctx: typer.Context) -> None:
    """Run the Celery beat scheduler (exactly one per deployment). Needs OOTCI_BROKER_URL."""
    settings = _settings()
    if settings.in_process:
        _die("OOTCI_BROKER_URL is not set: beat needs a broker")
    from workers.celery_app import run_beat

    run_beat(ctx.args)


app.add_typer(mutants_app, name="mutants")
app.command("corpus")(corpus_app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
