"""``ootci run|rerun|runs|show``: run a backend against torch specs and read the runs back.

Every ``--json`` here prints a document of ``service/documents.py``, the ones the API answers:
``show`` a RunDetail (``GET /api/runs/RUN``), ``runs`` a RunList (``GET /api/runs``), ``run``
a list of RunDetail (one per torch spec, however many), ``rerun`` the new run's RunDetail.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from service.cli.common import (
    BUNDLED_BACKEND,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    NO_SANDBOX_HELP,
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
from service.cli.startup import importing
from service.cli.terminal import printable

# A tail is for reading on a terminal; the whole log is `GET /api/runs/N/steps/S/log`.
MAX_LOG_LINES = 10_000

if TYPE_CHECKING:
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session

    from service.config import Settings
    from service.domain.verdict import ErrorKind
    from service.models import Run
    from service.schemas import FailureOut, RunDetail, RunSummary


@database_outage_exits_2
def run(
    torch: Annotated[
        list[str] | None,
        typer.Option("--torch", "-t", help="Torch spec (repeatable): installed, pip:REQ, "
                     "wheel:PATH|URL, path:DIR, nightly, nightly:YYYY-MM-DD, commit:SHA, "
                     "run:ID. Default: OOTCI_DEFAULT_TORCH."),
    ] = None,
    backend: Annotated[
        Path, typer.Option("--backend", "-b", help="Backend source dir with an ootci.toml, "
                           "or the name of a registered backend (`ootci backend add`).")
    ] = BUNDLED_BACKEND,
    as_json: Annotated[bool, typer.Option("--json", help="Print the runs as a JSON list.")] = False,
    re_register: Annotated[
        bool,
        typer.Option("--re-register", help="Point the recipe's backend name at this tree "
                     "even though another source registered it."),
    ] = False,
    no_sandbox: Annotated[bool, typer.Option("--no-sandbox", help=NO_SANDBOX_HELP)] = False,
    trigger: Annotated[str, typer.Option(hidden=True)] = "cli",
) -> None:
    """Build BACKEND against each torch spec, run its contract suite, store and show verdicts."""
    with importing():  # all the run will need, the pipeline's too (startup.py: why)
        import workers.pipeline.execute  # noqa: F401
        from service.commands.backends import BackendNameTaken, register_backend
        from service.commands.runs import create_run
        from service.db import session_scope
        from service.documents import run_detail
        from service.domain.torch_spec import SourceKind, TorchSpecError, parse_spec
        from service.domain.verdict import ErrorKind
        from service.models import Backend, Run
        from workers.pipeline.errors import UsageError
        from workers.pipeline.steps.recipe import load_recipe

    settings = sealed_or_die(load_settings(), no_sandbox)
    specs = torch or [settings.default_torch]
    # Validate everything the user typed before writing a single row.
    try:
        parsed = [
            parse_spec(spec, nightly_index_url=settings.nightly_index_url,
                       pip_index_url=settings.pip_index_url)
            for spec in specs
        ]
    except TorchSpecError as exc:
        die(str(exc))
    engine = migrated_engine(settings)
    registered = None if backend.is_dir() else _registered_id(engine, str(backend))
    if registered is None:
        try:
            recipe = load_recipe(backend.resolve())
        except UsageError as exc:
            die(str(exc))
    _check_recorded_runs(engine, [p.run_id for p in parsed if p.kind == SourceKind.RUN])
    _sweep_dead_runners(engine)

    try:
        with session_scope(engine) as s:
            if registered is not None:
                # The registered backend as it is: its git ref's newest commit, or its dir.
                be = s.get_one(Backend, registered)
            else:
                be = register_backend(s, recipe.name, str(backend.resolve()),
                                      changed_by=cli_actor(), re_register=re_register)
            run_ids = [create_run(s, be, spec, trigger=trigger).id for spec in specs]
            _own(s, run_ids)
    except BackendNameTaken as exc:
        die(str(exc))

    results: list[RunDetail] = []
    code = EXIT_OK
    for run_id in run_ids:
        state = _execute_with_progress(engine, settings, run_id, as_json)
        usage_error = None
        with session_scope(engine) as s:
            run_row = s.get_one(Run, run_id)
            kind = run_row.error_kind
            if kind == ErrorKind.USAGE:
                # The user's input was wrong (say, a pip requirement that does not exist):
                # report it and keep no half-made run.
                usage_error = _error_message(run_row.error, ErrorKind.USAGE)
                s.delete(run_row)
                _remove_run_dir(settings, run_id)
            else:
                results.append(_detail_or_die(run_detail(s, run_id), run_id))
        if usage_error is not None:
            # Nothing half-written: the runs this command queued after it go too.
            with session_scope(engine) as s:
                for later in run_ids[run_ids.index(run_id) + 1 :]:
                    s.delete(s.get_one(Run, later))
                    _remove_run_dir(settings, later)
            die(usage_error, _exit_code(state, kind))
        code = max(code, _exit_code(state, kind))

    if as_json:
        print_json([r.model_dump(mode="json") for r in results])
    else:
        _print_results(results)
    raise typer.Exit(code)


def _remove_run_dir(settings: Settings, run_id: int) -> None:
    """A refused run leaves nothing: not its row, not its logs, venv or HOME."""
    from workers.pipeline.cache.gc import remove_tree
    from workers.pipeline.cache.layout import run_dir

    remove_tree(run_dir(settings.resolved_work_dir, run_id))


def _registered_id(engine: Engine, name: str) -> int | None:
    """The id of the registered backend ``name`` (``--backend NAME``), or None."""
    from service.db import session_scope
    from service.queries.backends import registered_backend

    with session_scope(engine) as s:
        found = registered_backend(s, name)
        return found.id if found is not None else None


def _check_recorded_runs(engine: Engine, run_ids: list[int]) -> None:
    """A ``run:<id>`` must name a run that recorded its wheel: said now, before any row."""
    from service.db import session_scope
    from service.queries.torch_builds import NoRecordedTorch, recorded_torch

    with session_scope(engine) as s:
        for run_id in run_ids:
            try:
                recorded_torch(s, run_id)
            except NoRecordedTorch as exc:
                die(str(exc))


def cli_actor() -> str:
    """Who is at the keyboard, as far as this machine knows: recorded on backend changes."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for the uid (containers)
        user = f"uid{os.getuid()}"
    return f"cli:{user}@{socket.gethostname()}"


@database_outage_exits_2
def rerun(
    run_id: Annotated[int, typer.Argument(help="A failed or errored run.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the new run as JSON.")] = False,
    no_sandbox: Annotated[bool, typer.Option("--no-sandbox", help=NO_SANDBOX_HELP)] = False,
) -> None:
    """Rerun a failed run's failed tests (the whole suite if it failed before its tests:
    a build) against the same torch spec, and show the verdict."""
    from service.commands.runs import plan_rerun
    from service.db import session_scope
    from service.documents import run_detail

    settings = sealed_or_die(load_settings(), no_sandbox)
    engine = migrated_engine(settings)
    with session_scope(engine) as s:
        old = _run_or_die(s, run_id)
        new_id = plan_rerun(s, run_id)
        if new_id is None:
            die(f"run {run_id} is {old.state}: only a failed or errored run can be rerun")
        _own(s, [new_id])

    state = _execute_with_progress(engine, settings, new_id, as_json)
    with session_scope(engine) as s:
        result = _detail_or_die(run_detail(s, new_id), new_id)
    if as_json:
        print_json(result.model_dump(mode="json"))
    else:
        _print_results([result])
    raise typer.Exit(_exit_code(state))


def _sweep_dead_runners(engine: Engine) -> None:
    """End the runs an earlier ``ootci run`` of this host left when it was killed."""
    from service.cli.sweeper import sweep_once

    ended = sweep_once(engine).orphaned
    if ended:
        console.print(f"run(s) {ended} of a killed ootci run ended as infra errors; "
                      "`ootci resume` continues them")


def _own(session: Session, run_ids: list[int]) -> None:
    """Record this process on its runs: if it is killed, the next sweep ends them."""
    import os

    from service.cli.sweeper import process_started, this_host
    from service.commands.orphans import record_runner

    pid = os.getpid()
    record_runner(session, run_ids, host=this_host(), pid=pid, started=process_started(pid))


def _run_or_die(session: Session, run_id: int) -> Run:
    from service.models import Run

    run_row = session.get(Run, run_id)
    if run_row is None:
        die(f"no run {run_id}")
    return run_row


def _detail_or_die(detail: RunDetail | None, run_id: int) -> RunDetail:
    if detail is None:
        die(f"no run {run_id}")
    return detail


def _execute_with_progress(engine: Engine, settings: Settings, run_id: int, as_json: bool) -> str | None:
    from service.cli.progress import RunProgress
    from workers.pipeline.execute import execute_run

    with RunProgress(console, run_id, enabled=not as_json) as progress:
        state = execute_run(engine, settings, run_id, worker_id(), on_event=progress.on_event)
    report_to_github(engine, settings)
    from service.cli.culprit import verify_after_run

    verify_after_run(engine, settings, run_id)  # issue #29: undo the top suspects, then report
    return state


def report_to_github(engine: Engine, settings: Settings) -> None:
    """The embedded mode's outbox drain: what the run queued for GitHub goes out now."""
    from service.commands.outbox import due
    from service.db import session_factory

    sessions = session_factory(engine)
    with sessions() as session:
        if not due(session, limit=1):
            return  # most runs queue nothing: no GitHub client (PyGithub) to start
    from service.github.reporter import drain_quietly

    result = drain_quietly(settings, sessions)
    if result is not None and (result.sent or result.dry_run or result.errors):
        console.print(f"github: {result.sent} sent, {result.dry_run} dry-run"
                      + (f"; kept for later: {escape(result.errors[0])}" if result.errors else ""))


def _exit_code(state: str | None, error_kind: str | None = None) -> int:
    """0: passed. 2: the input was unusable (``usage``), or the run errored (the machine,
    ootci itself). 1: failed (the backend or upstream broke)."""
    from service.domain.verdict import ErrorKind
    from service.models import RunState

    if state == RunState.PASSED:
        return EXIT_OK
    if error_kind == ErrorKind.USAGE or state == RunState.ERRORED:
        return EXIT_USAGE
    return EXIT_FAILED


def _error_message(error: str | None, kind: ErrorKind) -> str:
    """What went wrong, as the run's error (``error_text``) says it after its kind."""
    from service.domain.verdict import error_text

    return (error or "").removeprefix(error_text(kind, ""))


def _torch_label(run: RunSummary) -> str:
    return run.torch_build.version if run.torch_build else run.torch_spec


def _verdict_label(run: RunSummary) -> str:
    """The run's verdict as every view names it (``compatible`` for a passed run)."""
    from service.models import RunState

    if not run.verdict:
        return "none yet" if run.state in RunState.ACTIVE else "-"
    return f"{run.verdict}/{run.verdict_subtype}" if run.verdict_subtype else run.verdict


def _failure_label(failure: FailureOut) -> str:
    kind = "/".join(part for part in (failure.category, failure.subtype) if part)
    return escape(f"[{kind or 'unknown'}] {failure.line[:90]}")


def _print_results(results: list[RunDetail]) -> None:
    table = Table(title="ootci runs")
    for col in ("run", "backend", "torch", "state", "verdict", "tests", "first failure"):
        table.add_column(col)
    for r in results:
        tests = ", ".join(f"{n} {k}" for k, n in sorted(r.test_counts.items())) or "-"
        first = _failure_label(r.failures[0]) if r.failures else "-"
        colour = {"passed": "green", "failed": "red"}.get(r.state, "yellow")
        state = f"[{colour}]{r.state}[/]" + (" [red](unsandboxed)[/]" if r.sandboxed is False else "")
        table.add_row(str(r.id), r.backend or "-", _torch_label(r), state,
                      _verdict_label(r), tests, first)
    out.print(table)
    for r in results:
        if r.error:
            out.print(f"run {r.id}: [yellow]{escape(r.error)}[/]")


@database_outage_exits_2
def list_runs(
    backend: Annotated[str | None, typer.Option(help="Only this backend (name).")] = None,
    state: Annotated[str | None, typer.Option(help="queued|running|passed|failed|errored")] = None,
    torch: Annotated[str | None, typer.Option(help="Only runs of exactly this torch spec.")] = None,
    torch_version: Annotated[
        str | None, typer.Option(help="Only runs whose torch resolved to this version.")
    ] = None,
    trigger: Annotated[
        str | None, typer.Option(help="Only runs started this way (e.g. cli, api, rerun).")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 20,
    offset: Annotated[int, typer.Option(min=0)] = 0,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List recent runs, newest first (the same filters as GET /api/runs)."""
    from service.db import session_scope
    from service.documents import run_list
    from service.models import RunState
    from service.queries.runs import RunFilters

    if state and state not in set(RunState):
        die(f"unknown state {state!r}: expected one of {', '.join(RunState)}")
    settings = load_settings()
    engine = migrated_engine(settings)
    filters = RunFilters(backend=backend, state=state, torch_spec=torch,
                         torch_version=torch_version, trigger=trigger)
    with session_scope(engine) as s:
        page = run_list(s, filters, limit=limit, offset=offset)
    if as_json:
        print_json(page.model_dump(mode="json"))
        return
    table = Table(title=f"last {limit} runs" + (f" (of {page.total})" if page.total else ""))
    for col in ("run", "backend", "torch", "state", "verdict", "created", "duration"):
        table.add_column(col)
    for r in page.runs:
        dur = f"{r.duration_s:.0f}s" if r.duration_s else "-"
        table.add_row(str(r.id), r.backend, _torch_label(r), r.state, _verdict_label(r),
                      r.created_at.isoformat()[:19], dur)
    out.print(table)


@database_outage_exits_2
def show(
    run_id: Annotated[int, typer.Argument(help="Run id.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
    log_lines: Annotated[
        int, typer.Option(min=0, max=MAX_LOG_LINES, help="Log tail lines per failed step.")
    ] = 30,
) -> None:
    """Show one run: steps, failures with their evidence, and the failing step's log tail."""
    from service.api.logs import read_log
    from service.db import session_scope
    from service.documents import run_detail
    from service.models import StepStatus

    settings = load_settings()
    engine = migrated_engine(settings)
    with session_scope(engine) as s:
        run_row = _run_or_die(s, run_id)
        data = _detail_or_die(run_detail(s, run_id), run_id)
        # Only the lines shown are read (read_log), and none when 0 are asked for.
        tails = {
            st.name: read_log(st, offset=None, limit=None, tail=log_lines)
            .data.decode("utf-8", "replace").splitlines()
            for st in run_row.steps
            if log_lines and st.status not in (StepStatus.PASSED, StepStatus.SKIPPED)
        }
    if as_json:
        print_json(data.model_dump(mode="json"))
        return
    git_version = data.torch_build.git_version if data.torch_build else None
    out.print(f"[bold]run {data.id}[/]  {data.backend} @ {data.backend_sha}  "
              f"torch {_torch_label(data)} ({git_version or '?'})  state [bold]{data.state}[/]")
    if data.torch_build and data.torch_build.artifact_url:
        # Which index or file the spec resolved to; the provision log says with which settings.
        out.print(printable(f"torch from {data.torch_build.artifact_url} "
                            f"({data.torch_spec}; the provision log has pip's settings)"),
                  markup=False, highlight=False)
    # Reasons quote the build's own words: text, not markup.
    out.print(escape(printable(f"verdict: {_verdict_label(data)}"
                               + (f" — {data.verdict_reason}" if data.verdict_reason else ""))),
              highlight=False)
    steps = Table(title="steps")
    for col in ("step", "status", "duration", "summary"):
        steps.add_column(col)
    for st in data.steps:
        dur = f"{st.duration_s:.1f}s" if st.duration_s is not None else "-"
        steps.add_row(st.name, st.status, dur, printable((st.summary or "")[:100]))
    out.print(steps)
    for attempt in data.attempt_history:
        if not attempt.current:
            # Reasons come from the build's own words: text, not markup.
            out.print(escape(printable(
                f"earlier attempt {attempt.attempt}: {attempt.outcome} — {attempt.reason or ''}"
                f" ({', '.join(f'{s.name} {s.status}' for s in attempt.steps)})")),
                highlight=False)
    # One entry per fingerprint: ten parametrisations of one break are one thing to read.
    groups: dict[str, list[FailureOut]] = {}
    for f in data.failures:
        groups.setdefault(f.fingerprint or f"#{f.id}", []).append(f)
    for group in groups.values():
        f = group[0]
        more = f" (+{len(group) - 1} more)" if len(group) > 1 else ""
        # Node ids and "[category/subtype]" are text, not rich markup.
        # Node ids, lines and captures come from the build: text, not markup or escapes.
        # The verdict is triage's; the rule's category is only its suggestion.
        out.print("[red]✗[/] " + escape(printable(
            f"{f.stage} {f.nodeid or ''}{more} [{f.category or 'unknown'}/{f.subtype}] rule={f.rule} "
            f"(the rule suggests {f.rule_category})")), highlight=False)
        if f.triage_reason:
            out.print(printable(f"    why: {f.triage_reason}"), markup=False, highlight=False)
        if f.finding.get("explanation"):
            # The rule's reading of the line, often with the fix (a recipe key to set).
            out.print(printable(f"    means: {f.finding['explanation']}"), markup=False,
                      highlight=False)
        line = f.line if len(f.line) <= 300 else f.line[:300] + " …"
        where = f"line {f.line_no}: " if f.line_no else ""
        out.print(printable(f"    {where}{line}"), markup=False, highlight=False)
        if f.captures:
            out.print(printable(f"    captures: {f.captures}"), markup=False)
    for name, lines in tails.items():
        out.rule(f"{name} log (last {len(lines)} lines)")
        out.print(printable("\n".join(lines)), markup=False, highlight=False)
