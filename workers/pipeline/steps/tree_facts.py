"""What a backend's source tree is, read from its files only (nothing runs): how it builds
(setup.py, pyproject's build backend, a bare CMake project), whether it finds torch
through ``find_package(Torch)``, its package and layout (flat or src), its test dir and
test requirements, its autoload entry point and its PrivateUse1 device name.

``recipe_draft.py`` writes an ``ootci.toml`` from these facts (``ootci init``) and
``recipe_check.py`` checks a recipe against them (``ootci recipe check``).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# What a --no-build-isolation build finds in every run's env already (provision.py's
# BUILD_TOOLS, torch itself): never worth a [build] requires line.
ALWAYS_THERE = frozenset({"setuptools", "wheel", "torch", "pip"})
_NOT_PACKAGES = frozenset({"tests", "test", "docs", "doc", "build", "dist", "examples",
                           "benchmarks", "third_party", "scripts", "tools", "cmake", "csrc"})
_TEST_DIRS = ("tests", "test")
_TEST_REQUIREMENT_FILES = ("requirements-test.txt", "test-requirements.txt",
                           "requirements/test.txt", "tests/requirements.txt")
_REQ_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_DEVICE = (
    re.compile(r"""rename_privateuse1_backend\(\s*["']([a-z_][a-z0-9_]*)["']"""),
    re.compile(r"""register_privateuse1_backend\(\s*["']([a-z_][a-z0-9_]*)["']"""),
)
# rename_privateuse1_backend(_BACKEND) with _BACKEND = "openreg" in the same file.
_DEVICE_BY_NAME = re.compile(r"rename_privateuse1_backend\(\s*([A-Za-z_]\w*)\s*\)")
_SETUP_NAME = re.compile(r"""\bname\s*=\s*["']([A-Za-z0-9._-]+)["']""")
_FIND_TORCH = re.compile(r"find_package\s*\(\s*Torch\b", re.IGNORECASE)
_SKIP_DIRS = frozenset({".git", "build", "dist", ".venv", "venv", "third_party", "node_modules",
                        "__pycache__"})


@dataclass(frozen=True)
class TreeFacts:
    root: Path
    name: str
    build: str  # "setup.py" | "pyproject" | "cmake" | "none"
    cpp_extension: bool  # setup.py builds with torch.utils.cpp_extension
    find_package_torch: bool  # a CMakeLists.txt (or .cmake file) calls find_package(Torch)
    package: str | None  # the top-level import name
    layout: str | None  # "flat" | "src"
    test_dir: str | None
    tests_are_a_package: bool  # <test_dir>/__init__.py or a conftest.py at the root
    test_requires: tuple[str, ...]
    test_requires_from: str | None  # where they were read
    build_requires: tuple[str, ...]  # pyproject's build-system.requires beyond ALWAYS_THERE
    device: str | None
    device_from: str | None
    autoload: bool  # a torch.backends entry point

    @property
    def installs_package(self) -> bool:
        """Whether the build installs a package into the env (pip install .)."""
        return self.build in {"setup.py", "pyproject"}

    def describe(self) -> list[str]:
        """What was found, one fact a line (the header of a drafted recipe)."""
        build = {
            "setup.py": "setup.py" + (" with torch.utils.cpp_extension" if self.cpp_extension else ""),
            "pyproject": "pyproject.toml's build backend",
            "cmake": "a CMake project" + (" (find_package(Torch))" if self.find_package_torch else ""),
            "none": "nothing to build (no setup.py, pyproject.toml or CMakeLists.txt)",
        }[self.build]
        if self.find_package_torch and self.build != "cmake":
            build += ", CMake with find_package(Torch)"
        lines = [f"build: {build}"]
        if self.package:
            lines.append(f"package: {self.package} ({self.layout} layout)")
        lines.append(f"tests: {self.test_dir}/" if self.test_dir else "tests: none found")
        if self.test_requires_from:
            lines.append(f"test requirements: {self.test_requires_from}")
        if self.device:
            lines.append(f"device: {self.device} (from {self.device_from})"
                         + (", autoloaded (torch.backends entry point)" if self.autoload else ""))
        return lines


def inspect_tree(root: Path) -> TreeFacts:
    root = Path(root).resolve()
    pyproject = _toml(root / "pyproject.toml")
    project = pyproject.get("project", {}) if isinstance(pyproject.get("project"), dict) else {}
    setup_py = _text(root / "setup.py")
    build = ("setup.py" if setup_py else "pyproject" if "build-system" in pyproject
             else "cmake" if (root / "CMakeLists.txt").is_file() else "none")
    package, layout = _package(root, str(project.get("name") or ""))
    name = str(project.get("name") or _first(_SETUP_NAME, setup_py) or package or root.name)
    test_dir = next((d for d in _TEST_DIRS if (root / d).is_dir()), None)
    test_requires, test_from = _test_requires(root, project)
    device, device_from = _device(root, package, layout)
    sources = setup_py + _text(root / "pyproject.toml")
    return TreeFacts(
        root=root,
        name=name,
        build=build,
        cpp_extension="cpp_extension" in setup_py,
        find_package_torch=any(_FIND_TORCH.search(_text(p)) for p in _cmake_files(root)),
        package=package,
        layout=layout,
        test_dir=test_dir,
        tests_are_a_package=bool(test_dir and (root / test_dir / "__init__.py").is_file())
        or (root / "conftest.py").is_file(),
        test_requires=test_requires,
        test_requires_from=test_from,
        build_requires=_build_requires(pyproject),
        device=device,
        device_from=device_from,
        autoload="torch.backends" in sources,
    )


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def _first(pattern: re.Pattern[str], text: str) -> str | None:
    match = pattern.search(text)
    return match.group(1) if match else None


def _walk(root: Path, suffixes: tuple[str, ...], limit: int = 2000) -> list[Path]:
    found: list[Path] = []
    stack = [root]
    while stack and len(found) < limit:
        for entry in sorted(stack.pop().iterdir()):
            if entry.is_dir() and entry.name not in _SKIP_DIRS and not entry.name.startswith("."):
                stack.append(entry)
            elif entry.is_file() and entry.name.endswith(suffixes):
                found.append(entry)
    return found


def _cmake_files(root: Path) -> list[Path]:
    return _walk(root, ("CMakeLists.txt", ".cmake"))


def _package(root: Path, project_name: str) -> tuple[str | None, str | None]:
    wanted = project_name.replace("-", "_")
    for base, layout in ((root / "src", "src"), (root, "flat")):
        if not base.is_dir():
            continue
        candidates = sorted(
            p.name for p in base.iterdir()
            if p.is_dir() and (p / "__init__.py").is_file() and p.name not in _NOT_PACKAGES
        )
        if candidates:
            return (wanted if wanted in candidates else candidates[0]), layout
    return None, None


def _requirements(text: str) -> tuple[str, ...]:
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return tuple(line for line in lines if line and not line.startswith("-"))


def _test_requires(root: Path, project: dict[str, Any]) -> tuple[tuple[str, ...], str | None]:
    extras = project.get("optional-dependencies", {})
    test = extras.get("test") if isinstance(extras, dict) else None
    if isinstance(test, list) and test:
        return tuple(str(r) for r in test), "pyproject.toml's `test` extra"
    for name in _TEST_REQUIREMENT_FILES:
        if (root / name).is_file():
            return _requirements(_text(root / name)), name
    return (), None


def _build_requires(pyproject: dict[str, Any]) -> tuple[str, ...]:
    system = pyproject.get("build-system", {})
    requires = system.get("requires", []) if isinstance(system, dict) else []
    out = []
    for requirement in requires if isinstance(requires, list) else []:
        name = _first(_REQ_NAME, str(requirement))
        if name and name.lower().replace("_", "-") not in ALWAYS_THERE:
            out.append(str(requirement))
    return tuple(out)


def _device(root: Path, package: str | None, layout: str | None) -> tuple[str | None, str | None]:
    where = root / "src" / package if layout == "src" and package else (
        root / package if package else root)
    for path in [*_walk(where, (".py",)), *_walk(root, (".cpp", ".cc", ".h"))][:2000]:
        text = _text(path)
        for pattern in _DEVICE:
            found = _first(pattern, text)
            if found:
                return found, str(path.relative_to(root))
        constant = _first(_DEVICE_BY_NAME, text)
        if constant:
            value = re.search(rf"""^{constant}\s*(?::\s*\w+\s*)?=\s*["']([a-z_][a-z0-9_]*)["']""",
                              text, re.MULTILINE)
            if value:
                return value.group(1), str(path.relative_to(root))
    return None, None
