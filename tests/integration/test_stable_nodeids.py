"""A test keeps its node id, and a failure its fingerprint and breakage title, across edits
of a directory backend and across homes: real ``ootci run``s of a backend without a pytest
config of its own, from a checkout holding ``./.ootci`` whose ``pyproject.toml`` configures
pytest. That layout made pytest root its ids at the checkout, through the run tree's cache
path: ``.ootci/cache/sources/pyonly/nogit-<hash>/tests/...``, a new id with every edit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.db import make_engine
from service.models import Breakage, Failure, TestResult
from tests.support.pyonly import write_pyonly_backend

ROOT = Path(__file__).resolve().parents[2]
SUITE = "def test_same():\n    pass\n\n\ndef test_fails():\n    assert False, 'red'\n"


def _checkout(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-ra"\n')
    return root


def _ootci_run(cwd: Path, backend: Path) -> int:
    """``ootci run`` from ``cwd`` with its default home, ``./.ootci``; the run's id."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    environ.update({"PYTHONPATH": str(ROOT), "OOTCI_TEST_PROCESSES": "1", "COLUMNS": "200"})
    proc = subprocess.run(
        [sys.executable, "-m", "service.cli", "run", "--torch", "installed",
         "--backend", str(backend), "--json"],
        cwd=cwd, env=environ, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 1, proc.stderr  # test_fails fails
    (run,) = json.loads(proc.stdout)
    return int(run["id"])


def _seen(home: Path, run_id: int) -> tuple[list[str], set[str], list[str]]:
    """The run's node ids, its failures' fingerprints and every breakage title."""
    engine = make_engine(f"sqlite:///{home / 'ootci.db'}")
    with Session(engine) as s:
        ids = sorted(s.scalars(select(TestResult.nodeid).where(TestResult.run_id == run_id)))
        prints = set(s.scalars(select(Failure.fingerprint).where(Failure.run_id == run_id)))
        titles = list(s.scalars(select(Breakage.title)))
    engine.dispose()
    return ids, {p for p in prints if p}, titles


def test_node_ids_and_fingerprints_survive_edits_and_homes(tmp_path: Path) -> None:
    backend = write_pyonly_backend(tmp_path / "backend", {"test_ids.py": SUITE})
    one, two = _checkout(tmp_path / "one"), _checkout(tmp_path / "two")

    first = _seen(one / ".ootci", _ootci_run(one, backend))
    (backend / "tests" / "test_ids.py").write_text(SUITE + "\n\ndef test_new():\n    pass\n")
    edited = _seen(one / ".ootci", _ootci_run(one, backend))
    elsewhere = _seen(two / ".ootci", _ootci_run(two, backend))

    # The run trees (gone after each run, their locks left) were under the checkout, one
    # per edit: where the old ids came from.
    trees = list((one / ".ootci" / "cache" / "sources" / "pyonly").glob("nogit-*.lock"))
    assert len(trees) == 2
    assert first[0] == ["tests/test_ids.py::test_fails", "tests/test_ids.py::test_same"]
    assert edited[0] == elsewhere[0] == sorted([*first[0], "tests/test_ids.py::test_new"])
    assert len(first[1]) == 1 and first[1] == edited[1] == elsewhere[1]
    assert first[2] == edited[2] == elsewhere[2] == [
        "test-regression: tests/test_ids.py::test_fails"]


def test_a_pytest_config_above_ootcis_home_does_not_reach_the_backends_tests(
    tmp_path: Path,
) -> None:
    """The checkout holding ``./.ootci`` configures pytest for its own tests: options that
    deselect everything and a conftest that cannot import. A backend without a config of
    its own runs as it would anywhere else: its tests, none of the checkout's options."""
    backend = write_pyonly_backend(tmp_path / "backend", {"test_ids.py": SUITE})
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\naddopts = "-k never_selected"\n')
    (checkout / "conftest.py").write_text("raise ImportError('the checkout’s own conftest')\n")
    ids, prints, _ = _seen(checkout / ".ootci", _ootci_run(checkout, backend))
    assert ids == ["tests/test_ids.py::test_fails", "tests/test_ids.py::test_same"]
    assert len(prints) == 1
