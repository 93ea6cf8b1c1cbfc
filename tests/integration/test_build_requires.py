"""``[build] requires`` reaches the build, and a build missing a module is told to use it
(issue #28: the verdict advised ``[test] requires``, which is installed after the build)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.faults import ootci
from tests.support.pyonly import write_pyonly_backend

pytestmark = pytest.mark.slow

SUITE = {"test_ok.py": "def test_ok():\n    pass\n"}
BUILD = '["{python}", "-c", "import pybind11; print(\'pybind11\', pybind11.__version__)"]'


def _recipe(backend: Path, requires: str) -> None:
    text = (backend / "ootci.toml").read_text()
    old = "command = [\"{python}\", \"-c\", \"print('nothing to compile')\"]"
    assert old in text
    (backend / "ootci.toml").write_text(text.replace(old, f"command = {BUILD}\n{requires}"))


def test_a_build_module_is_installed_from_build_requires(tmp_path: Path) -> None:
    missing = write_pyonly_backend(tmp_path / "missing", SUITE)
    _recipe(missing, "")
    home = tmp_path / "home"
    red = ootci(home, "run", "--backend", str(missing), "--torch", "installed", "--json")
    [run] = json.loads(red.stdout)
    assert red.returncode == 2 and run["verdict"] == "infra", red.stderr  # the env's fault
    [failure] = run["failures"]
    assert failure["rule"] == "build-module-missing", failure
    shown = ootci(home, "show", str(run["id"])).stdout
    assert "add it to the recipe's [build] requires" in shown, shown
    assert "[test] requires" not in shown

    fixed = write_pyonly_backend(tmp_path / "fixed", SUITE)
    (fixed / "ootci.toml").write_text(
        (fixed / "ootci.toml").read_text().replace('name = "pyonly"', 'name = "pyonly2"'))
    _recipe(fixed, 'requires = ["pybind11"]')
    green = ootci(home, "run", "--backend", str(fixed), "--torch", "installed", "--json")
    assert green.returncode == 0, green.stderr + green.stdout[-3000:]
    log = home / "work" / "runs" / str(json.loads(green.stdout)[0]["id"]) / "build.log"
    assert "installing the recipe's [build] requires: pybind11" in log.read_text()
