"""What `ootci init` reads from a tree: the bundled and fixture backends' shapes."""

from __future__ import annotations

import tomllib
from pathlib import Path

from tests.support.paths import REPO_ROOT
from workers.pipeline.steps.recipe_draft import draft_recipe
from workers.pipeline.steps.tree_facts import inspect_tree

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "backends"


def test_the_bundled_backend() -> None:
    facts = inspect_tree(REPO_ROOT / "backend")
    assert (facts.name, facts.build, facts.package, facts.layout) == (
        "torch_openreg", "setup.py", "torch_openreg", "flat")
    assert facts.cpp_extension and facts.autoload
    assert facts.device == "openreg"  # rename_privateuse1_backend(_BACKEND), _BACKEND = "openreg"
    # setuptools and wheel are the build env's own; pyyaml is for its torchgen step
    assert facts.build_requires == ("cmake>=3.18", "ninja", "pyyaml")


def test_the_three_shapes() -> None:
    flat, cmake, src = (inspect_tree(FIXTURES / n) for n in ("extflat", "cmakeops", "pysrc"))
    assert (flat.build, flat.layout, flat.installs_package) == ("setup.py", "flat", True)
    assert (cmake.build, cmake.find_package_torch, cmake.installs_package) == ("cmake", True, False)
    assert (src.build, src.layout, src.test_requires) == ("pyproject", "src", ("expecttest",))


def test_a_device_without_autoload_gets_conformance_with_an_import() -> None:
    recipe = tomllib.loads(draft_recipe(inspect_tree(FIXTURES / "feas")))
    assert recipe["conformance"] == {"device": "feas", "import": "feas_backend"}


def test_tests_as_a_package_get_importlib_mode(tmp_path: Path) -> None:
    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "__init__.py").write_text("")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(name='acme')\n")
    recipe = tomllib.loads(draft_recipe(inspect_tree(tmp_path)))
    assert "--import-mode=importlib" in recipe["test"]["command"]
    assert recipe["test"]["env"] == {"PYTHONSAFEPATH": "1"}
