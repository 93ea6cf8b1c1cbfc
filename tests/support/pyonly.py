"""A backend with nothing to compile, for pipeline tests about distribution, retries and
dispatch rather than builds: its build step prints, its suite is plain pytest files."""

from __future__ import annotations

from pathlib import Path

NAME = "pyonly"

RECIPE = """\
[backend]
name = "pyonly"

[build]
command = ["{python}", "-c", "print('nothing to compile')"]

[test]
command = ["{python}", "-m", "pytest", "tests", "-p", "no:cacheprovider", "--junitxml={junit}"]
timeout_per_test = 300
"""


def write_pyonly_backend(root: Path, tests: dict[str, str] | None = None) -> Path:
    """The backend's tree at ``root``: its recipe and ``tests/<name>`` for each test file."""
    (root / "tests").mkdir(parents=True)
    (root / "ootci.toml").write_text(RECIPE)
    for name, text in (tests or {}).items():
        (root / "tests" / name).write_text(text)
    return root
