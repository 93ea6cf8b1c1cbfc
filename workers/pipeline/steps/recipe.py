"""Load a backend's ``ootci.toml``: how ootci builds and tests it.

```toml
[backend]
name = "torch_openreg"
[build]
command = ["{python}", "-m", "pip", "install", "--no-build-isolation", "--no-deps", "."]
env = { MAX_JOBS = "2" }              # optional
requires = ["pyyaml", "ninja"]        # optional: pip requirements the build imports
network = false                       # optional: true lets the build command reach the network
[test]
command = ["{python}", "-m", "pytest", "tests", "--junitxml={junit}"]
timeout_per_test = 300                # optional, seconds
env = { OPENREG_STRICT = "1" }        # optional
requires = ["expecttest", "numpy"]    # optional; default: pyproject's `test` extra
[conformance]                         # optional: run the conformance suite (conformance/)
device = "openreg"                    # the device type under test: torch.<device>
import = "torch_openreg"              # optional: a module to import when it does not autoload
```
Commands run from the backend dir. ``{python}`` becomes the provisioned interpreter and
``{junit}`` the JUnit XML path. ``[build] env`` becomes ``Recipe.env`` (the build step's),
``[test] env`` becomes ``Recipe.test_env``: a test switch must not change what gets built.
``[build] requires`` are what the build itself needs besides torch, setuptools and wheel
(a ``--no-build-isolation`` build sees only the run's env), installed into the run's env
before the build command (by ootci's pip, with the network). The build command itself
runs without network unless ``[build] network = true``. ``[test] requires`` are the suite's own dependencies, installed
into the run's env before it runs; without it, the backend's
``[project.optional-dependencies] test`` (pyproject.toml). docs/recipes.md is the
reference of every key.
``[conformance]`` makes the run test the backend's device against ootci's conformance suite
after its own tests (``testrun/conformance.py``), with the ``[test] env``.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workers.pipeline.errors import RecipeError

RECIPE_FILE = "ootci.toml"


@dataclass(frozen=True)
class Recipe:
    """A backend's ootci.toml."""

    name: str
    source_dir: Path
    build_command: tuple[str, ...]
    test_command: tuple[str, ...]
    timeout_per_test_s: int = 300
    env: dict[str, str] = field(default_factory=dict)  # [build] env
    build_requires: tuple[str, ...] = ()  # [build] requires (pip requirement strings)
    test_env: dict[str, str] = field(default_factory=dict)  # [test] env
    # [test] requires (pip requirement strings), else the backend's own `test` extra.
    test_requires: tuple[str, ...] = ()
    # [conformance] device: the device type the conformance suite tests; None = not run.
    conformance_device: str | None = None
    conformance_import: str | None = None  # [conformance] import
    # [build] network: the build command may reach the network (default: no network).
    build_network: bool = False

    def summary(self) -> dict[str, object]:
        """What the registry shows of the recipe (``backends.recipe``)."""
        return {
            "name": self.name,
            "build": list(self.build_command),
            "test": list(self.test_command),
            "timeout_per_test": self.timeout_per_test_s,
        }


_KNOWN = {
    "backend": {"name"},
    "build": {"command", "env", "requires", "network"},
    "test": {"command", "timeout_per_test", "env", "requires"},
}
# Tables a recipe may leave out.
_OPTIONAL = {"conformance": {"device", "import"}}
_DEVICE_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def load_recipe(backend_dir: Path) -> Recipe:
    backend_dir = Path(backend_dir)
    if not backend_dir.is_dir():
        raise RecipeError(f"backend dir {backend_dir} does not exist")
    path = backend_dir / RECIPE_FILE
    if not path.is_file():
        raise RecipeError(
            f"{backend_dir} has no {RECIPE_FILE}: ootci needs one to build and test it"
        )
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message already carries "(at line L, column C)".
        raise RecipeError(f"{path}: TOML syntax error: {exc}") from None
    except UnicodeDecodeError as exc:
        raise RecipeError(f"{path}: not UTF-8 text: {exc}") from None
    return _parse(data, path, backend_dir.resolve())


def expand(command: tuple[str, ...], **values: str) -> list[str]:
    """Substitute ``{python}``-style placeholders, leaving other braces alone (a vendor's
    command may legitimately contain them)."""
    out = []
    for part in command:
        for key, value in values.items():
            part = part.replace("{" + key + "}", value)
        out.append(part)
    return out


def _parse(data: dict[str, Any], path: Path, source_dir: Path) -> Recipe:
    for table, keys in _KNOWN.items():
        section = _table(data, table, path)
        unknown = sorted(set(section) - keys)
        if unknown:
            raise RecipeError(
                f"{path}: unknown key {table}.{unknown[0]} (expected one of: "
                f"{', '.join(sorted(keys))})"
            )
    unknown_tables = sorted(set(data) - set(_KNOWN) - set(_OPTIONAL))
    if unknown_tables:
        raise RecipeError(
            f"{path}: unknown table [{unknown_tables[0]}] (expected [backend], [build], [test], "
            "[conformance])"
        )
    device, device_import = _conformance(data, path)

    name = _require(data, "backend", "name", str, path)
    if not name.strip():
        raise RecipeError(f"{path}: backend.name must not be empty")
    build_command = _command(data, "build", path)
    test_command = _command(data, "test", path)

    network = data["build"].get("network", False)
    if not isinstance(network, bool):
        raise RecipeError(f"{path}: build.network must be true or false, got {network!r}")
    timeout = data["test"].get("timeout_per_test", 300)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout <= 0:
        raise RecipeError(
            f"{path}: test.timeout_per_test must be a positive integer (seconds), got {timeout!r}"
        )
    return Recipe(
        name=name,
        source_dir=source_dir,
        build_command=build_command,
        test_command=test_command,
        timeout_per_test_s=timeout,
        env=_env(data, "build", path),
        build_requires=_requires(data, "build", path),
        test_env=_env(data, "test", path),
        test_requires=_test_requires(data, path, source_dir),
        conformance_device=device,
        conformance_import=device_import,
        build_network=network,
    )


def _conformance(data: dict[str, Any], path: Path) -> tuple[str | None, str | None]:
    """``[conformance]``'s device type and import module; (None, None) without the table."""
    if "conformance" not in data:
        return None, None
    section = data["conformance"]
    if not isinstance(section, dict):
        raise RecipeError(f"{path}: conformance must be a table, got {type(section).__name__}")
    unknown = sorted(set(section) - _OPTIONAL["conformance"])
    if unknown:
        raise RecipeError(
            f"{path}: unknown key conformance.{unknown[0]} (expected one of: device, import)"
        )
    device = _require(data, "conformance", "device", str, path)
    if not _DEVICE_NAME.match(device) or device in {"cpu", "cuda", "meta", "privateuseone"}:
        raise RecipeError(
            f"{path}: conformance.device must be the backend's own device type "
            f"(lower-case letters, digits, _), got {device!r}"
        )
    module = section.get("import")
    if module is not None and (not isinstance(module, str) or not _MODULE_NAME.match(module)):
        raise RecipeError(f"{path}: conformance.import must be a module name, got {module!r}")
    return device, module


def _test_requires(data: dict[str, Any], path: Path, source_dir: Path) -> tuple[str, ...]:
    if "requires" in data["test"]:
        return _requires(data, "test", path)
    return _test_extra(source_dir)


def _requires(data: dict[str, Any], table: str, path: Path) -> tuple[str, ...]:
    requires = data[table].get("requires", [])
    if not isinstance(requires, list) or not all(
        isinstance(r, str) and r.strip() for r in requires
    ):
        raise RecipeError(f"{path}: {table}.requires must be a list of pip requirement strings")
    return tuple(requires)


def _test_extra(source_dir: Path) -> tuple[str, ...]:
    """The backend's declared `test` extra; a pyproject ootci cannot read declares none
    (the build step, not the recipe, is where a broken pyproject is reported)."""
    pyproject = source_dir / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return ()
    extras = project.get("optional-dependencies", {}) if isinstance(project, dict) else {}
    test = extras.get("test", []) if isinstance(extras, dict) else []
    if not isinstance(test, list):
        return ()
    return tuple(r for r in test if isinstance(r, str) and r.strip())


def _table(data: dict[str, Any], table: str, path: Path) -> dict[str, Any]:
    if table not in data:
        raise RecipeError(f"{path}: missing table [{table}]")
    section = data[table]
    if not isinstance(section, dict):
        raise RecipeError(f"{path}: {table} must be a table, got {type(section).__name__}")
    return section


def _require(data: dict[str, Any], table: str, key: str, kind: type, path: Path) -> Any:
    section = data[table]
    if key not in section:
        raise RecipeError(f"{path}: missing key {table}.{key}")
    value = section[key]
    if not isinstance(value, kind):
        raise RecipeError(
            f"{path}: {table}.{key} must be a {kind.__name__}, got {type(value).__name__}"
        )
    return value


def _command(data: dict[str, Any], table: str, path: Path) -> tuple[str, ...]:
    command = _require(data, table, "command", list, path)
    if not command or not all(isinstance(part, str) and part for part in command):
        raise RecipeError(
            f"{path}: {table}.command must be a non-empty list of non-empty strings "
            "(argv, no shell)"
        )
    return tuple(command)


def _env(data: dict[str, Any], table: str, path: Path) -> dict[str, str]:
    env = data[table].get("env", {})
    if not isinstance(env, dict):
        raise RecipeError(f"{path}: {table}.env must be a table of strings")
    for key, value in env.items():
        if not isinstance(value, str):
            raise RecipeError(
                f"{path}: {table}.env.{key} must be a string, got {type(value).__name__}"
            )
    return dict(env)
