"""``ootci init``: a commented ``ootci.toml`` drafted from what a backend's tree is
(``tree_facts.py``), one that builds and tests it as it is.

The test step imports the *installed* package, never the source tree's copy (which has no
built extension): ``python -m pytest`` from the backend dir puts that dir first on
``sys.path``, so an installed backend's suite gets ``PYTHONSAFEPATH=1`` (``-P``: no cwd on
the path) and, when its tests are a package or a ``conftest.py`` sits at the root (pytest
would insert the root itself), ``--import-mode=importlib``. A bare CMake project installs
nothing: its suite imports the tree, and its package finds the library the build wrote to
``$OPENREG_BUILD_DIR``.
"""

from __future__ import annotations

import json

from workers.pipeline.steps.tree_facts import TreeFacts

PIP_INSTALL = ["{python}", "-m", "pip", "install", "--no-build-isolation", "--no-deps", "-v", "."]
# A bare CMake project: configured against the torch under test (its CMake package dir,
# torch.utils.cmake_prefix_path) into the build dir ootci gives the run.
CMAKE_BUILD = [
    "bash", "-c",
    'cmake -S . -B "$OPENREG_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release '
    '-DCMAKE_PREFIX_PATH="$({python} -c \'import torch.utils; print(torch.utils.cmake_prefix_path)\')" '
    '&& cmake --build "$OPENREG_BUILD_DIR"',
]
NOTHING_TO_BUILD = ["{python}", "-c", "print('nothing to build')"]


def _toml(value: object) -> str:
    """A TOML value for strings and lists of strings (JSON's escaping is TOML's basic string)."""
    if isinstance(value, list | tuple):
        return "[" + ", ".join(json.dumps(v) for v in value) + "]"
    return json.dumps(value)


def test_command(facts: TreeFacts) -> list[str]:
    command = ["{python}", "-m", "pytest", facts.test_dir or "."]
    if facts.installs_package and facts.tests_are_a_package:
        command.append("--import-mode=importlib")
    return [*command, "-p", "no:cacheprovider", "--junitxml={junit}"]


def build_command(facts: TreeFacts) -> list[str]:
    if facts.installs_package:
        return PIP_INSTALL
    return CMAKE_BUILD if facts.build == "cmake" else NOTHING_TO_BUILD


def draft_recipe(facts: TreeFacts) -> str:
    """The ``ootci.toml`` text for ``facts``' tree, every choice commented."""
    lines = ["# ootci.toml drafted by `ootci init` from this tree:"]
    lines += [f"#   {fact}" for fact in facts.describe()]
    lines += ["# Every key: docs/recipes.md. Check it without a run: ootci recipe check .", "",
              "[backend]", f"name = {_toml(facts.name)}", "", "[build]"]
    lines += _build_section(facts)
    lines += ["", "[test]"]
    lines += _test_section(facts)
    lines += ["", *_conformance_section(facts)]
    return "\n".join(lines).rstrip() + "\n"


def _build_section(facts: TreeFacts) -> list[str]:
    lines: list[str] = []
    if facts.installs_package:
        lines += ["# Installed into the run's own env against the torch under test (no build",
                  "# isolation: a fresh torch from PyPI would be built against otherwise)."]
    elif facts.build == "cmake":
        lines += ["# CMake configured against the torch under test (find_package(Torch) looks in",
                  "# torch.utils.cmake_prefix_path), built into the run's build dir, which the",
                  "# test step exports as $OPENREG_BUILD_DIR too."]
    lines.append(f"command = {_toml(build_command(facts))}")
    if facts.build_requires:
        lines += ["# pyproject.toml's build-system.requires (besides setuptools, wheel, torch),",
                  "# installed into the run's env before the build.",
                  f"requires = {_toml(facts.build_requires)}"]
    else:
        lines.append('# requires = ["pyyaml"]   # what the build imports besides torch, setuptools, wheel')
    lines.append('# env = { MAX_JOBS = "2" }   # the build\'s own variables')
    return lines


def _test_section(facts: TreeFacts) -> list[str]:
    lines: list[str] = []
    if facts.installs_package:
        why = ["# The suite imports the installed package, not the source tree's copy (which has",
               "# no built extension): PYTHONSAFEPATH keeps the backend dir off sys.path"]
        if facts.tests_are_a_package:
            why[-1] += ", and"
            why.append("# --import-mode=importlib keeps pytest from inserting it.")
        else:
            why[-1] += "."
        lines += why
    lines.append(f"command = {_toml(test_command(facts))}")
    lines.append("timeout_per_test = 300")
    env = {"PYTHONSAFEPATH": "1"} if facts.installs_package else {}
    if env:
        lines.append("env = { " + ", ".join(f"{k} = {_toml(v)}" for k, v in env.items()) + " }")
    else:
        lines.append('# env = { MY_SWITCH = "1" }   # the suite\'s own variables')
    if facts.test_requires:
        lines += [f"# From {facts.test_requires_from}: installed into the run's env before the suite.",
                  f"requires = {_toml(facts.test_requires)}"]
    else:
        lines.append('# requires = ["expecttest"]   # the suite\'s own dependencies '
                     "(numpy, expecttest, pytest, pytest-timeout are always there)")
    return lines


def _conformance_section(facts: TreeFacts) -> list[str]:
    if not facts.device:
        return ["# [conformance]           # ootci's PrivateUse1 conformance suite, after the tests",
                '# device = "mydevice"     # no rename_privateuse1_backend(...) found in this tree']
    lines = [f"# ootci's PrivateUse1 conformance suite against torch.{facts.device}, after the tests.",
             "[conformance]", f"device = {_toml(facts.device)}"]
    if facts.autoload:
        lines.append(f"# import = {_toml(facts.package or facts.name)}   # not needed: it autoloads")
    elif facts.package:
        lines += ["# No torch.backends entry point: the suite imports the package itself.",
                  f"import = {_toml(facts.package)}"]
    return lines
