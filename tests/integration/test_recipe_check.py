"""`ootci recipe check` names each problem of a broken recipe in one line, with its fix
(issue #28), through the real CLI; the CUDA-toolkit and tree checks it relies on."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.faults import ootci
from tests.support.paths import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "backends" / "extflat"
SAFE = 'env = { PYTHONSAFEPATH = "1" }\n'

# (what to change in init's recipe, or in setup.py; what the one line must say)
BROKEN = {
    "unknown-key": ("timeout_per_test = 300", "timeout = 300",
                    "test.timeout: unknown key -> fix: did you mean 'timeout_per_test'?"),
    "placeholder": ('"--junitxml={junit}"', '"--junitxml={junit_xml}"',
                    "test.command: unknown placeholder {junit_xml}"),
    "shell-string": ('command = ["{python}", "-m", "pytest", "tests", "-p", "no:cacheprovider", '
                     '"--junitxml={junit}"]', 'command = "python -m pytest tests"',
                     "test.command: is a string; ootci runs an argv list, no shell -> fix: command = "
                     '["{python}", "-m", "pytest", "tests"]'),
    "env-number": ('# env = { MAX_JOBS = "2" }', "env = { MAX_JOBS = 2 }",
                   "build.env: must be a table of strings"),
    "network-string": ('# env = { MAX_JOBS = "2" }', 'network = "yes"',
                       "build.network: must be true or false, got 'yes'"),
    "source-tree-import": (SAFE, "",
                           "imports the source tree's extflat/ (no built extension)"),
    "build-module": ("setup.py", "import yaml\n",
                     "build.requires: setup.py imports 'yaml', which the run's env does not have"
                     ' -> fix: add requires = ["pyyaml"] to [build]'),
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    tree = tmp_path / "extflat"
    shutil.copytree(FIXTURE, tree)
    assert ootci(tmp_path / "home", "init", str(tree)).returncode == 0
    return tree


def test_init_recipe_has_no_problem(tree: Path, tmp_path: Path) -> None:
    check = ootci(tmp_path / "home", "recipe", "check", str(tree), "--no-torch")
    assert check.returncode == 0, check.stdout
    assert check.stdout == ""


def test_a_build_that_asks_for_the_network_is_a_good_recipe(tree: Path, tmp_path: Path) -> None:
    text = (tree / "ootci.toml").read_text()
    (tree / "ootci.toml").write_text(text.replace('# env = { MAX_JOBS = "2" }', "network = true", 1))
    check = ootci(tmp_path / "home", "recipe", "check", str(tree), "--no-torch")
    assert (check.returncode, check.stdout) == (0, "")


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_each_broken_recipe_gets_one_line_naming_its_problem(
    tree: Path, tmp_path: Path, case: str
) -> None:
    old, new, expected = BROKEN[case]
    if old == "setup.py":
        (tree / "setup.py").write_text(new + (tree / "setup.py").read_text())
    else:
        text = (tree / "ootci.toml").read_text()
        assert old in text
        (tree / "ootci.toml").write_text(text.replace(old, new, 1))
    check = ootci(tmp_path / "home", "recipe", "check", str(tree), "--no-torch")
    assert check.returncode == 2
    lines = check.stdout.splitlines()
    assert len(lines) == 1, lines
    assert expected in lines[0] and " -> fix: " in lines[0], lines[0]


def test_the_torch_line_says_where_the_torch_comes_from(tree: Path, tmp_path: Path) -> None:
    check = ootci(tmp_path / "home", "recipe", "check", str(tree), "--torch", "installed")
    assert check.returncode == 0, check.stdout + check.stderr
    [line] = check.stdout.splitlines()
    assert line.startswith("torch: installed -> torch ") and "site-packages/torch" in line
