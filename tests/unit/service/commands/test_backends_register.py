"""A backend's name stays with the source that registered it (issue #14 item 5): on a real
database (SQLite and Postgres), and through `ootci run` in a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from service.commands.backends import BackendNameTaken, register_backend
from service.db import make_engine, session_scope
from service.models import Backend, BackendChange
from tests.support.paths import REPO_ROOT
from tests.support.pyonly import write_pyonly_backend


def test_a_taken_name_is_refused_unless_re_registered_and_each_change_is_recorded(
    engine: Engine,
) -> None:
    with session_scope(engine) as s:
        register_backend(s, "acme", "/srv/acme", changed_by="cli:alice@host")
    with session_scope(engine) as s:
        assert register_backend(s, "acme", "/srv/acme", changed_by="cli:bob@host").source == (
            "/srv/acme")
    with pytest.raises(BackendNameTaken, match="--re-register"), session_scope(engine) as s:
        register_backend(s, "acme", "/tmp/impostor", changed_by="cli:mallory@host")
    with session_scope(engine) as s:
        register_backend(s, "acme", "/srv/acme-v2", changed_by="cli:alice@host",
                         re_register=True)
    with Session(engine) as s:
        assert s.scalars(select(Backend.source)).one() == "/srv/acme-v2"
        changes = [(c.change, c.changed_by, c.source_before, c.source_after)
                   for c in s.scalars(select(BackendChange).order_by(BackendChange.id))]
        assert all(c.changed_at is not None for c in s.scalars(select(BackendChange)))
    assert changes == [
        ("registered", "cli:alice@host", None, "/srv/acme"),
        ("re-registered", "cli:alice@host", "/srv/acme", "/srv/acme-v2"),
    ]


def _ootci(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    environ.update({"OOTCI_HOME": str(home), "OOTCI_SANDBOX": "false", "COLUMNS": "200"})
    return subprocess.run([sys.executable, "-m", "service.cli", *args], cwd=REPO_ROOT,
                          env=environ, capture_output=True, text=True, timeout=600)


def test_ootci_run_of_another_tree_with_a_registered_name_is_refused(tmp_path: Path) -> None:
    test_file = {"test_ok.py": "def test_ok():\n    assert True\n"}
    original = write_pyonly_backend(tmp_path / "original", test_file)
    impostor = write_pyonly_backend(tmp_path / "impostor", test_file)
    home = tmp_path / "home"
    first = _ootci(home, "run", "--backend", str(original), "--torch", "installed")
    assert first.returncode == 0, first.stdout + first.stderr
    refused = _ootci(home, "run", "--backend", str(impostor), "--torch", "installed")
    assert refused.returncode == 2
    assert "--re-register" in refused.stdout + refused.stderr
    engine = make_engine(f"sqlite:///{home / 'ootci.db'}")
    with Session(engine) as s:
        assert s.scalars(select(Backend.source)).one() == str(original.resolve())
        assert len(s.scalars(select(BackendChange)).all()) == 1
    engine.dispose()
    moved = _ootci(home, "run", "--backend", str(impostor), "--torch", "installed",
                   "--re-register")
    assert moved.returncode == 0, moved.stdout + moved.stderr
    engine = make_engine(f"sqlite:///{home / 'ootci.db'}")
    with Session(engine) as s:
        assert s.scalars(select(Backend.source)).one() == str(impostor.resolve())
        change = s.scalars(select(BackendChange).order_by(BackendChange.id.desc())).first()
        assert change is not None and change.change == "re-registered"
        assert change.changed_by.startswith("cli:")
    engine.dispose()
