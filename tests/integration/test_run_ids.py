"""A run id is never served with an earlier run's files (issue #28): a refused run leaves
no dir behind, and a first attempt that finds files under its id starts without them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.faults import ootci
from tests.support.pyonly import write_pyonly_backend

pytestmark = pytest.mark.slow

SUITE = {"test_ok.py": "def test_ok():\n    pass\n"}


def test_a_refused_run_leaves_no_files_for_the_next_run_of_its_id(tmp_path: Path) -> None:
    backend = write_pyonly_backend(tmp_path / "pyonly", SUITE)
    home = tmp_path / "home"
    wheel = tmp_path / "torch-9.9.9-py3-none-any.whl"
    wheel.write_bytes(b"<html>404 not found</html>")

    refused = ootci(home, "run", "--backend", str(backend), "--torch", f"wheel:{wheel}")
    assert refused.returncode == 2, refused.stderr
    runs = home / "work" / "runs"
    assert not (runs / "1").exists(), sorted(p.name for p in (runs / "1").rglob("*"))

    # Files under an id whose row is gone (a restored database, an older ootci): the next
    # run of that id never serves them as its own.
    (runs / "1").mkdir(parents=True)
    (runs / "1" / "provision.log").write_text("STALE: torch 9.9.9 does not resolve\n")
    green = ootci(home, "run", "--backend", str(backend), "--torch", "installed", "--json")
    assert green.returncode == 0, green.stderr
    [run] = json.loads(green.stdout)
    assert run["id"] == 1
    log = (runs / "1" / "provision.log").read_text()
    assert "STALE" not in log and "provisioning torch for 'installed'" in log
