"""``ootci recipe check``: every problem of a backend's ``ootci.toml`` found without running
its suite, one line each with its fix.

``load_recipe`` stops at the first error (a run needs a recipe, not a list); here every
table and key is read leniently and each problem is collected: unknown keys (with the
nearest known one), wrong types, unknown placeholders, a build that imports what the run's
env lacks, a suite that imports the source tree instead of the installed package, and a
``find_package(Torch)`` build against a CUDA torch on a machine without a CUDA toolkit.
"""

from __future__ import annotations

import ast
import difflib
import re
import shutil
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workers.pipeline.steps.recipe import RECIPE_FILE
from workers.pipeline.steps.recipe_draft import test_command
from workers.pipeline.steps.tree_facts import ALWAYS_THERE, TreeFacts

KEYS = {
    "backend": {"name"},
    "build": {"command", "env", "requires", "network"},
    "test": {"command", "timeout_per_test", "env", "requires"},
    "conformance": {"device", "import"},
}
PLACEHOLDERS = {"build": {"python"}, "test": {"python", "junit"}}
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# What a build finds in the run's env besides the standard library and the tree itself.
_IN_ENV = {"setuptools", "torch", "wheel", "numpy", "pkg_resources", "distutils", "pip"}
_DISTRIBUTION_OF = {"yaml": "pyyaml", "cv2": "opencv-python", "PIL": "pillow",
                    "google": "protobuf", "Cython": "cython"}


@dataclass(frozen=True)
class Problem:
    where: str  # "build.command", "test", "setup.py", "torch"
    what: str
    fix: str

    def line(self) -> str:
        return f"{self.where}: {self.what} -> fix: {self.fix}"


def check_recipe(root: Path, facts: TreeFacts) -> tuple[list[Problem], dict[str, Any]]:
    """The recipe's problems, and its data as far as it parsed ({} when it did not)."""
    path = root / RECIPE_FILE
    if not path.is_file():
        return [Problem(RECIPE_FILE, "missing", f"write one: ootci init {root}")], {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        return [Problem(RECIPE_FILE, f"not TOML: {exc}", "fix the syntax at that line")], {}
    problems = _shape(data)
    problems += _commands(data)
    problems += _build_env(data, facts)
    problems += _test_imports(data, facts)
    return problems, data


def _nearest(word: str, known: set[str]) -> str:
    near = difflib.get_close_matches(word, sorted(known), n=1)
    return f"did you mean {near[0]!r}?" if near else f"known: {', '.join(sorted(known))}"


def _shape(data: dict[str, Any]) -> list[Problem]:
    problems = []
    for table in sorted(set(data) - set(KEYS)):
        problems.append(Problem(f"[{table}]", "unknown table",
                                f"{_nearest(table, set(KEYS))} (docs/recipes.md)"))
    for table, keys in KEYS.items():
        section = data.get(table)
        if section is None:
            if table != "conformance":
                problems.append(Problem(f"[{table}]", "missing", f"add [{table}] (ootci init drafts one)"))
            continue
        if not isinstance(section, dict):
            problems.append(Problem(table, "must be a table", f"write it as [{table}]"))
            continue
        for key in sorted(set(section) - keys):
            problems.append(Problem(f"{table}.{key}", "unknown key", _nearest(key, keys)))
        problems += _values(table, section)
    return problems


def _values(table: str, section: dict[str, Any]) -> list[Problem]:
    problems = []
    for required in {"backend": ["name"], "build": ["command"], "test": ["command"],
                     "conformance": ["device"]}[table]:
        if required not in section:
            problems.append(Problem(f"{table}.{required}", "missing", f"set {table}.{required}"))
    if table == "backend" and "name" in section and not (
            isinstance(section["name"], str) and section["name"].strip()):
        problems.append(Problem("backend.name", "must be a non-empty string", 'name = "my_backend"'))
    env = section.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        problems.append(Problem(f"{table}.env", "must be a table of strings",
                                f'{table}.env = {{ NAME = "value" }} (numbers quoted)'))
    requires = section.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) and r.strip() for r in requires):
        problems.append(Problem(f"{table}.requires", "must be a list of pip requirements",
                                f'{table}.requires = ["pyyaml>=6"]'))
    if table == "build" and not isinstance(section.get("network", False), bool):
        problems.append(Problem("build.network", f"must be true or false, got {section['network']!r}",
                                "network = true (only for a build that downloads)"))
    timeout = section.get("timeout_per_test", 300) if table == "test" else 1
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout <= 0:
        problems.append(Problem("test.timeout_per_test", f"must be a positive integer, got {timeout!r}",
                                "timeout_per_test = 300 (seconds)"))
    return problems


def _commands(data: dict[str, Any]) -> list[Problem]:
    problems = []
    for table in ("build", "test"):
        section = data.get(table)
        command = section.get("command") if isinstance(section, dict) else None
        if command is None:
            continue
        if isinstance(command, str):
            problems.append(Problem(f"{table}.command", "is a string; ootci runs an argv list, no shell",
                                    f"command = {_as_list(command)}"))
            continue
        if not isinstance(command, list) or not command or not all(
                isinstance(p, str) and p for p in command):
            problems.append(Problem(f"{table}.command", "must be a non-empty list of non-empty strings",
                                    'command = ["{python}", "-m", "pip", "install", "."]'))
            continue
        for part in command:
            for name in _PLACEHOLDER.findall(part):
                if name not in PLACEHOLDERS[table]:
                    known = ", ".join("{" + p + "}" for p in sorted(PLACEHOLDERS[table]))
                    problems.append(Problem(f"{table}.command", f"unknown placeholder {{{name}}}",
                                            f"use {known} (others are passed on as they are)"))
        if "{python}" not in " ".join(command) and command[0] in {"python", "python3", "pip", "pytest"}:
            tool = command[0] if command[0] in {"pip", "pytest"} else "..."
            problems.append(Problem(f"{table}.command", f"runs {command[0]!r} from PATH, not the run's env",
                                    f'start it with "{{python}}", "-m", "{tool}"'))
    return problems


def _as_list(command: str) -> str:
    import shlex

    try:
        parts = shlex.split(command)
    except ValueError:
        parts = command.split()
    if parts and parts[0] in {"python", "python3"}:
        parts[0] = "{python}"
    elif parts and parts[0] in {"pip", "pytest"}:
        parts[:1] = ["{python}", "-m", parts[0]]
    return "[" + ", ".join(f'"{p}"' for p in parts) + "]"


def _setup_imports(root: Path) -> set[str]:
    try:
        tree = ast.parse((root / "setup.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return set()
    names: set[str] = set()
    for node in tree.body:  # top level: what runs whenever setup.py is read
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def _requirement_names(requires: object) -> set[str]:
    names = set()
    for r in requires if isinstance(requires, list) else []:
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", str(r))
        if match:
            names.add(match.group(1).lower().replace("_", "-"))
    return names


def _build_env(data: dict[str, Any], facts: TreeFacts) -> list[Problem]:
    """What the build imports that the run's env will not have."""
    build = data.get("build") if isinstance(data.get("build"), dict) else {}
    assert isinstance(build, dict)
    declared = _requirement_names(build.get("requires", []))
    isolated = "--no-build-isolation" not in " ".join(map(str, build.get("command", [])))
    problems = []
    if facts.installs_package and not isolated:
        for requirement in facts.build_requires:
            name = next(iter(_requirement_names([requirement])), "")
            # cmake, ninja: their PyPI packages are the commands, which the machine may have.
            if name and name not in declared and name not in ALWAYS_THERE and not shutil.which(name):
                problems.append(Problem(
                    "build.requires", f"pyproject.toml's build-system needs {requirement!r}, which a "
                    "--no-build-isolation build finds only if the run's env has it",
                    f'add requires = ["{requirement}"] to [build]'))
    own = {facts.package} if facts.package else set()
    for module in sorted(_setup_imports(facts.root) - set(sys.stdlib_module_names) - _IN_ENV - own):
        distribution = _DISTRIBUTION_OF.get(module, module).lower().replace("_", "-")
        if distribution not in declared:
            problems.append(Problem(
                "build.requires", f"setup.py imports {module!r}, which the run's env does not have",
                f'add requires = ["{distribution}"] to [build] ([test] requires comes after the build)'))
    return problems


def _test_imports(data: dict[str, Any], facts: TreeFacts) -> list[Problem]:
    """Whether the suite will import the installed package or the source tree's copy."""
    test = data.get("test") if isinstance(data.get("test"), dict) else {}
    assert isinstance(test, dict)
    command = test.get("command")
    if not (facts.installs_package and facts.layout == "flat" and facts.package
            and isinstance(command, list) and all(isinstance(p, str) for p in command)):
        return []
    env = test.get("env", {}) if isinstance(test.get("env"), dict) else {}
    safe = env.get("PYTHONSAFEPATH") or "-P" in command[:2]
    runs_module = len(command) > 2 and command[1] == "-m"
    problems = []
    if runs_module and not safe:
        problems.append(Problem(
            "test", f"`{command[0]} -m {command[2]}` from the backend dir imports the source tree's "
            f"{facts.package}/ (no built extension), not the installed one",
            'add env = { PYTHONSAFEPATH = "1" } to [test]'))
    if facts.tests_are_a_package and "--import-mode=importlib" not in command:
        why = f"{facts.test_dir}/__init__.py" if facts.test_dir and (
            facts.root / facts.test_dir / "__init__.py").is_file() else "conftest.py at the root"
        problems.append(Problem(
            "test.command", f"pytest puts the backend dir on sys.path ({why}), so the suite imports "
            f"the source tree's {facts.package}/",
            f"add \"--import-mode=importlib\" (as in {test_command(facts)})"))
    return problems
