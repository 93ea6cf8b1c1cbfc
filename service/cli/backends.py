"""``ootci backend add|list|show|remove``: the backend registry.

A registered backend is what the nightly schedules and what a push to its repository
rebuilds; ``ootci run --backend NAME`` runs one. ``--json`` prints the documents
``GET /api/backends`` answers. Mounted by ``service/cli/app.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from service.cli.common import die, load_settings, migrated_engine, out, print_json

backend_app = typer.Typer(help="Register the backends the nightly and pushes build.",
                          no_args_is_help=True)


@backend_app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="The backend's name (runs and pages use it).")],
    git: Annotated[str | None, typer.Option("--git", help="A git URL (https://, ssh://, "
                   "file://) the workers clone.")] = None,
    path: Annotated[Path | None, typer.Option("--path", help="A backend dir on the workers.")] = None,
    ref: Annotated[str | None, typer.Option("--ref", help="Branch or tag to build "
                   "(with --git). Default: main.")] = None,
    subdir: Annotated[str | None, typer.Option("--subdir", help="The backend's dir inside "
                      "the repository (with --git).")] = None,
    re_register: Annotated[bool, typer.Option("--re-register", help="Point a name "
                           "registered from another source at this one.")] = False,
) -> None:
    """Register NAME from a git repository (--git URL [--ref] [--subdir]) or a directory
    (--path): checked first (the URL answers and has the ref, the dir has an ootci.toml),
    nothing is written otherwise."""
    from service.cli.runs import cli_actor
    from service.commands.audit import audit
    from service.commands.backends import BackendNameTaken, add_backend
    from service.db import session_scope
    from service.sources import SourceUnreachable, check_source, subdir_problem

    if (git is None) == (path is None):
        die("give one source: --git URL or --path DIR")
    if path is not None and (ref is not None or subdir is not None):
        die("--ref and --subdir are for --git; --path names the backend dir itself")
    if subdir is not None and (problem := subdir_problem(subdir)) is not None:
        die(problem)
    if git is not None and ref is None:
        ref = "main"
    source = git if git is not None else str(path.resolve())  # type: ignore[union-attr]
    settings = load_settings()
    try:
        sha = check_source(source, ref, settings.git_tokens())
    except SourceUnreachable as exc:
        die(str(exc))
    engine = migrated_engine(settings)
    try:
        with session_scope(engine) as s:
            add_backend(s, name, source, changed_by=cli_actor(), ref=ref, subdir=subdir,
                        re_register=re_register)
            audit(s, cli_actor(), "backend.add", f"backend:{name}",
                  {"source": source, "ref": ref, "subdir": subdir})
    except BackendNameTaken as exc:
        die(str(exc))
    at = f" ({ref} is {sha[:12]})" if sha else ""
    out.print(f"registered {escape(name)} from {escape(source)}{escape(at)}", highlight=False)


@backend_app.command("list")
def list_backends(
    as_json: Annotated[bool, typer.Option("--json", help="Print the backends as JSON.")] = False,
) -> None:
    """The registered backends."""
    from service.db import session_scope
    from service.documents import backend_list

    engine = migrated_engine(load_settings())
    with session_scope(engine) as s:
        backends = backend_list(s)
    if as_json:
        print_json([b.model_dump(mode="json") for b in backends])
        return
    table = Table("name", "source", "ref", "subdir", "last built")
    for b in backends:
        table.add_row(escape(b.name), escape(b.source), escape(b.ref or "-"),
                      escape(b.subdir or "-"), (b.last_built_sha or "-")[:12])
    out.print(table)


@backend_app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="A registered backend.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the backend as JSON.")] = False,
) -> None:
    """One registered backend and who changed it when."""
    from service.db import session_scope
    from service.documents import backend_out

    engine = migrated_engine(load_settings())
    with session_scope(engine) as s:
        found = backend_out(s, name)
    if found is None:
        die(f"backend {name!r} is not registered")
    if as_json:
        print_json(found.model_dump(mode="json"))
        return
    out.print(f"{escape(found.name)}: {escape(found.source)}"
              f"{' @ ' + escape(found.ref) if found.ref else ''}"
              f"{' in ' + escape(found.subdir) if found.subdir else ''}", highlight=False)
    out.print(f"last built: {found.last_built_sha or '-'}", highlight=False)
    for c in found.changes:
        out.print(f"  {c.changed_at:%Y-%m-%d %H:%M} {escape(c.change)} by {escape(c.changed_by)}"
                  f": {escape(c.source_after)}", highlight=False)


@backend_app.command("remove")
def remove(name: Annotated[str, typer.Argument(help="A registered backend.")]) -> None:
    """Take NAME off the nightly and push rebuilds; its runs stay."""
    from service.cli.runs import cli_actor
    from service.commands.audit import audit
    from service.commands.backends import remove_backend
    from service.db import session_scope

    engine = migrated_engine(load_settings())
    with session_scope(engine) as s:
        removed = remove_backend(s, name, changed_by=cli_actor())
        if removed:
            audit(s, cli_actor(), "backend.remove", f"backend:{name}")
    if not removed:
        die(f"backend {name!r} is not registered")
    out.print(f"removed {escape(name)}", highlight=False)
