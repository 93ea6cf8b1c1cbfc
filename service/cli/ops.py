"""``ootci migrate|reclassify|reindex-logs|gc|serve|worker|beat``: operating a deployment."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from service.cli.common import (
    console,
    database_outage_exits_2,
    die,
    load_settings,
    migrated_engine,
    out,
    print_json,
    sealed_or_die,
    worker_id,
)
from service.domain.redaction import hide_url_passwords


@database_outage_exits_2
def migrate() -> None:
    """Create or upgrade the database schema."""
    settings = load_settings()
    migrated_engine(settings)
    console.print(f"database at head: {hide_url_passwords(settings.resolved_database_url)}")


@database_outage_exits_2
def reclassify(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Re-run classification, triage and breakage grouping over every stored run (after a
    rules.toml or fingerprint change)."""
    from dataclasses import asdict

    from service.db import session_scope
    from workers.pipeline.verdict.reclassify import reclassify as replay

    settings = load_settings()
    engine = migrated_engine(settings)
    with session_scope(engine) as s:
        report = replay(s, settings)
    if as_json:
        print_json(asdict(report))
    else:
        out.print(
            f"reclassified {report.runs} runs: {report.failures_after} failures "
            f"({report.changed} changed), breakages {report.breakages_before} -> "
            f"{report.breakages_after}"
        )


@database_outage_exits_2
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
    """Remove torch environments, build dirs, git mirrors and run dirs that have not been
    used for a while (every run also does this before it provisions)."""
    from workers.pipeline.cache.gc import collect_garbage_per_settings

    try:
        report = collect_garbage_per_settings(
            load_settings(), max_age_days=max_age_days, keep=keep, dry_run=dry_run
        )
    except ValueError as exc:
        die(str(exc))
    if as_json:
        print_json(
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
        return
    verb = "would remove" if dry_run else "removed"
    for r in report.removed:
        out.print(f"{verb} {r.kind} {escape(str(r.path))} ({r.size_bytes / 1e6:.0f} MB)")
    out.print(
        f"{verb} {len(report.removed)} entries, {report.freed_bytes / 1e9:.2f} GB; kept {report.kept}"
        + (f"; {len(report.skipped_busy)} busy, skipped" if report.skipped_busy else "")
    )


@database_outage_exits_2
def reindex_logs(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Index the step logs stored before ootci indexed them, so their middle pages are read
    from the nearest point, not from the start (once, after upgrading; safe to interrupt
    and run again)."""
    import time

    from service.commands.log_reindex import ReindexReport, reindex_log, unindexed_logs
    from service.db import session_scope

    engine = migrated_engine(load_settings())
    with session_scope(engine) as s:
        step_ids = unindexed_logs(s)
    report = ReindexReport()
    shown = 0.0
    for done, step_id in enumerate(step_ids, start=1):
        with session_scope(engine) as s:  # one log per transaction: a stop loses none
            reindex_log(s, step_id, report)
        if done == len(step_ids) or time.monotonic() - shown >= 1.0:  # stderr
            shown = time.monotonic()
            console.print(f"{done}/{len(step_ids)} logs ({report.log_bytes / 1e6:.0f} MB read)")
    if as_json:
        print_json({"logs": report.logs, "recompressed": report.recompressed,
                    "log_bytes": report.log_bytes})
    else:
        out.print(f"indexed {report.logs} logs ({report.recompressed} compressed again, "
                  f"{report.log_bytes / 1e6:.0f} MB)")


@database_outage_exits_2
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8000,
) -> None:
    """Serve the dashboard, JSON API and webhooks. Without a broker, queued runs execute
    in this process (the embedded default)."""
    from service.api.app import serve as serve_app
    from service.cli.runs import report_to_github
    from service.dispatch import CeleryDispatcher, Dispatcher, InProcessDispatcher
    from workers.pipeline.execute import execute_run

    settings = load_settings()
    if settings.in_process:
        # Runs execute in this process: refuse here, as a worker would, without a sandbox.
        settings = sealed_or_die(settings)
    engine = migrated_engine(settings)
    if settings.in_process:
        def execute_and_report(run_id: int) -> None:
            execute_run(engine, settings, run_id, worker_id())
            report_to_github(engine, settings)

        dispatcher: Dispatcher = InProcessDispatcher(execute_and_report)
        # No broker to redeliver: runs left by a dead process of this host (or queued by the
        # previous stop) are taken up now, and again every embedded_sweep_s.
        from service.cli.sweeper import PeriodicSweeper, sweep_once

        report = sweep_once(engine, dispatcher)
        if report.dispatched:
            console.print(f"resuming {len(report.dispatched)} run(s) left from the last stop: "
                          f"{report.dispatched}")
        PeriodicSweeper(engine, dispatcher, settings.embedded_sweep_s).start()
    else:
        dispatcher = CeleryDispatcher(settings.broker_url)
    console.print(f"ootci serving on http://{host}:{port}/ "
                  f"(database {hide_url_passwords(settings.resolved_database_url)})")
    serve_app(settings, host, port, dispatcher=dispatcher, engine=engine)


def worker(ctx: typer.Context) -> None:
    """Run a Celery worker (extra arguments go to `celery worker`). Needs OOTCI_BROKER_URL."""
    settings = load_settings()
    if settings.in_process:
        die("OOTCI_BROKER_URL is not set: a worker needs a broker (e.g. redis://127.0.0.1:6379/0)")
    migrated_engine(settings)
    from workers.celery_app import run_worker

    run_worker(ctx.args)


def beat(ctx: typer.Context) -> None:
    """Run the Celery beat scheduler (exactly one per deployment). Needs OOTCI_BROKER_URL."""
    settings = load_settings()
    if settings.in_process:
        die("OOTCI_BROKER_URL is not set: beat needs a broker")
    from workers.celery_app import run_beat

    run_beat(ctx.args)
