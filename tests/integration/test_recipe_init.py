"""`ootci init` then `ootci run` on three backends of different shapes that were never
given a recipe by hand (issue #28), through the real CLI, builds and suites. They are the
worked examples of docs/recipes.md, whose recipe blocks must be what `ootci init` writes."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.support.faults import ootci
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.slow

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "backends"
EXAMPLES = ["extflat", "cmakeops", "pysrc"]


def _tree(tmp_path: Path, name: str) -> Path:
    tree = tmp_path / name
    shutil.copytree(FIXTURES / name, tree)
    assert not (tree / "ootci.toml").exists()
    return tree


def _doc_recipes() -> dict[str, str]:
    """docs/recipes.md's worked examples: each ```toml block after a `<!-- init: NAME -->`."""
    text = (REPO_ROOT / "docs" / "recipes.md").read_text()
    return dict(re.findall(r"<!-- init: (\w+) -->\s*```toml\n(.*?)```", text, re.DOTALL))


@pytest.mark.parametrize("name", EXAMPLES)
def test_init_then_run_is_green(tmp_path: Path, name: str) -> None:
    tree = _tree(tmp_path, name)
    home = tmp_path / "home"
    init = ootci(home, "init", str(tree))
    assert init.returncode == 0, init.stderr
    recipe = (tree / "ootci.toml").read_text()
    assert _doc_recipes()[name] == recipe, "docs/recipes.md shows another recipe than init writes"

    check = ootci(home, "recipe", "check", str(tree), "--torch", "installed")
    assert check.returncode == 0, check.stdout + check.stderr

    run = ootci(home, "run", "--backend", str(tree), "--torch", "installed", "--json", timeout=900)
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-3000:]
    [result] = json.loads(run.stdout)
    assert result["state"] == "passed" and result["test_counts"].get("passed", 0) >= 1, result


def test_the_readme_recipe_trap_is_what_init_avoids(tmp_path: Path) -> None:
    """The flat-layout trap: the README's old test step imports the source tree's package,
    which has no built extension; `recipe check` names it and init's recipe is free of it."""
    tree = _tree(tmp_path, "extflat")
    home = tmp_path / "home"
    assert ootci(home, "init", str(tree)).returncode == 0
    trap = (tree / "ootci.toml").read_text().replace('env = { PYTHONSAFEPATH = "1" }\n', "")
    (tree / "ootci.toml").write_text(trap)
    check = ootci(home, "recipe", "check", str(tree), "--no-torch")
    assert check.returncode == 2
    assert "imports the source tree's extflat/" in check.stdout
    assert 'PYTHONSAFEPATH = "1"' in check.stdout
