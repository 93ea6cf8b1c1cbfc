"""``ootci init`` and ``ootci recipe check``: a backend's first ``ootci.toml``, drafted from its
tree, and every problem of one found without running its suite (docs/recipes.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from service.cli.common import EXIT_OK, EXIT_USAGE, console, die, load_settings, out

if TYPE_CHECKING:
    from workers.pipeline.steps.recipe_check import Problem
    from workers.pipeline.steps.tree_facts import TreeFacts

recipe_app = typer.Typer(
    help="Check a backend's ootci.toml without running it.", no_args_is_help=True,
    rich_markup_mode=None,
)


def init(
    directory: Annotated[Path, typer.Argument(help="The backend's source tree.")] = Path("."),
    force: Annotated[bool, typer.Option("--force", help="Replace an existing ootci.toml.")] = False,
    show: Annotated[
        bool, typer.Option("--print", help="Print the recipe instead of writing it.")
    ] = False,
) -> None:
    """Write an ootci.toml for a backend tree from what is in it.

    Reads setup.py, pyproject.toml and CMakeLists.txt (flat or src layout, the test dir,
    the test requirements, a torch.backends entry point, the PrivateUse1 device name) and
    writes a commented recipe whose test step imports the installed package, not the
    source tree's copy.

    Example: ootci init ../torch-acme && ootci run --backend ../torch-acme
    """
    from workers.pipeline.steps.recipe import RECIPE_FILE
    from workers.pipeline.steps.recipe_draft import draft_recipe
    from workers.pipeline.steps.tree_facts import inspect_tree

    if not directory.is_dir():
        die(f"{directory} is not a directory")
    facts = inspect_tree(directory)
    text = draft_recipe(facts)
    if show:
        sys.stdout.write(text)  # the file's text as it is: no wrapping, no markup
        return
    target = directory / RECIPE_FILE
    if target.exists() and not force:
        die(f"{target} exists: `ootci recipe check {directory}` checks it, --force replaces it")
    target.write_text(text, encoding="utf-8")
    for fact in facts.describe():
        console.print(f"  {fact}", markup=False, highlight=False)
    console.print(f"wrote {target}; next: ootci recipe check {directory} && "
                  f"ootci run --backend {directory}", markup=False, highlight=False, soft_wrap=True)


@recipe_app.command("check")
def check(
    directory: Annotated[Path, typer.Argument(help="The backend's source tree.")] = Path("."),
    torch: Annotated[
        str | None,
        typer.Option("--torch", "-t", help="Also resolve this torch spec (nothing is "
                     "installed) and check the build can use it. Default: OOTCI_DEFAULT_TORCH."),
    ] = None,
    no_torch: Annotated[
        bool, typer.Option("--no-torch", help="Skip resolving a torch (offline).")
    ] = False,
) -> None:
    """Check a backend's ootci.toml without running its suite: one line per problem, with its fix.

    Checks unknown keys and placeholders, the types of every value, what the build imports
    that the run's env lacks, whether the test step imports the installed package or the
    source tree's copy, which torch the spec resolves to (and from where), and whether a
    find_package(Torch) build needs a CUDA toolkit this machine lacks. Exit 0: no problem,
    2: problems.

    Example: ootci recipe check ../torch-acme --torch pip:torch==2.13.0
    """
    from workers.pipeline.steps.recipe_check import check_recipe
    from workers.pipeline.steps.tree_facts import inspect_tree

    if not directory.is_dir():
        die(f"{directory} is not a directory")
    facts = inspect_tree(directory)
    problems, _data = check_recipe(directory.resolve(), facts)
    if not no_torch:
        problems += _torch_problems(torch, facts)
    for problem in problems:
        out.print(problem.line(), markup=False, highlight=False, soft_wrap=True)
    if problems:
        console.print(f"{len(problems)} problem(s) in {directory / 'ootci.toml'}",
                      markup=False, highlight=False)
        raise typer.Exit(EXIT_USAGE)
    console.print(f"{directory / 'ootci.toml'}: no problem found", markup=False, highlight=False)
    raise typer.Exit(EXIT_OK)


def _torch_problems(spec_text: str | None, facts: TreeFacts) -> list[Problem]:
    """The torch line (always printed) and its problems: a spec that does not resolve (pip's
    own reason), a CUDA torch for a find_package(Torch) build without a CUDA toolkit."""
    from service.domain.torch_spec import TorchSpecError, parse_spec
    from workers.pipeline.errors import PipelineError
    from workers.pipeline.steps.recipe_check import Problem
    from workers.pipeline.steps.torch_check import CPU_INDEX, cuda_toolkit, torch_facts

    settings = load_settings()
    text = spec_text or settings.default_torch
    try:
        spec = parse_spec(text, nightly_index_url=settings.nightly_index_url,
                          pip_index_url=settings.pip_index_url)
        torch = torch_facts(spec, settings.resolved_cache_dir)
    except TorchSpecError as exc:
        return [Problem("torch", str(exc), "see `ootci run --help` for the spec kinds")]
    except PipelineError as exc:
        return [Problem("torch", str(exc),
                        "pick a version the line names, or lift the constraint it quotes")]
    out.print(f"torch: {text} -> torch {torch.version} from {torch.source}"
              + (f" (pip settings: {torch.how})" if torch.how else ""),
              markup=False, highlight=False, soft_wrap=True)
    if not (facts.find_package_torch and torch.cuda):
        return []
    toolkit = cuda_toolkit()
    if toolkit.usable:
        return []
    lacks = ", ".join(toolkit.missing)
    return [Problem(
        "torch", f"torch {torch.version} is a CUDA build: find_package(Torch) then needs a CUDA "
        f"toolkit, and this machine lacks {lacks}" + (f" (nvcc {toolkit.nvcc})" if toolkit.nvcc else ""),
        f"build against a CPU torch: OOTCI_TORCH_INDEX_URL={CPU_INDEX}, "
        f"or --torch 'pip:torch==X@@{CPU_INDEX}', or a +cpu wheel (wheel:PATH)")]
