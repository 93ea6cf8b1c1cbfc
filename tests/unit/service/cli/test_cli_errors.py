"""Bad input to `ootci`: a one-line reason, exit 2, and nothing written to the database."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, inspect, select

from service.db import make_engine
from service.models import Run
from tests.support.cli import ootci


def runs_in(tmp_path: Path) -> int:
    db = tmp_path / "home" / "ootci.db"
    if not db.exists():
        return 0
    engine = make_engine(f"sqlite:///{db}")
    if "runs" not in inspect(engine).get_table_names():
        return 0
    with engine.connect() as conn:
        return int(conn.scalar(select(func.count()).select_from(Run)) or 0)


def recipe_dir(tmp_path: Path, text: str) -> Path:
    d = tmp_path / "backend"
    d.mkdir()
    (d / "ootci.toml").write_text(text)
    return d


GOOD_RECIPE = """
[backend]
name = "tiny"
[build]
command = ["{python}", "-c", "print('built')"]
[test]
command = ["{python}", "-c", "print('tested')"]
"""


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "--torch", "conda:torch"], "unknown torch spec kind"),
        (["run", "--backend", "/nonexistent/backend"], "/nonexistent/backend"),
    ],
)
def test_usage_errors_exit_2_with_a_reason(tmp_path: Path, args: list[str], expected: str) -> None:
    proc = ootci(tmp_path, *args)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr
    assert runs_in(tmp_path) == 0


def test_recipe_missing_key_names_the_key(tmp_path: Path) -> None:
    backend = recipe_dir(tmp_path, GOOD_RECIPE.replace('[test]\ncommand = ["{python}", "-c", "print(\'tested\')"]\n', "[test]\n"))
    proc = ootci(tmp_path, "run", "--backend", str(backend), "--torch", "installed")
    assert proc.returncode == 2, proc.stderr
    assert "command" in proc.stderr and "test" in proc.stderr
    assert runs_in(tmp_path) == 0


def test_unreachable_database_is_a_clear_error(tmp_path: Path) -> None:
    backend = recipe_dir(tmp_path, GOOD_RECIPE)
    proc = ootci(tmp_path, "run", "--backend", str(backend), "--torch", "installed",
                 OOTCI_DATABASE_URL="postgresql+psycopg://nobody@127.0.0.1:1/none")
    assert proc.returncode == 2
    assert "cannot reach database" in proc.stderr and "127.0.0.1:1" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_invalid_settings_name_the_variable(tmp_path: Path) -> None:
    proc = ootci(tmp_path, "runs", OOTCI_DATABASE_URL="mysql://x/y")
    assert proc.returncode == 2
    assert "OOTCI_DATABASE_URL" in proc.stderr and "unsupported database" in proc.stderr


def test_show_unknown_run(tmp_path: Path) -> None:
    proc = ootci(tmp_path, "show", "12345")
    assert proc.returncode == 2 and "no run 12345" in proc.stderr


def test_an_unresolvable_pip_requirement_is_usage_and_leaves_no_run(tmp_path: Path) -> None:
    backend = recipe_dir(tmp_path, GOOD_RECIPE)
    proc = ootci(tmp_path, "run", "--backend", str(backend), "--torch", "pip:torch==0.0.0.1",
                 "--torch", "installed")
    assert proc.returncode == 2, proc.stderr
    assert "torch==0.0.0.1" in proc.stderr and "Traceback" not in proc.stderr
    assert runs_in(tmp_path) == 0
