"""`ootci rerun` through the real CLI: a run that failed, fixed, then rerun on its failed
tests only; refused with a reason for a run that cannot be rerun."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.gates import gate_fixture  # noqa: F401 (the `gate` fixture)
from tests.support.pyonly import write_pyonly_backend

ROOT = Path(__file__).resolve().parents[2]

SUITE = """\
import os

def test_ok():
    pass

def test_fixed_later():
    assert os.path.exists(os.environ["FIXED_MARK"])
"""


def ootci(home: Path, *args: str, **env: str) -> tuple[int, Any, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    # The operator lets FIXED_MARK through to builds and tests (nothing else gets there).
    environ.update({"OOTCI_HOME": str(home), "COLUMNS": "200",
                    "OOTCI_CHILD_ENV_PASSTHROUGH": '["FIXED_MARK"]', **env})
    proc = subprocess.run(
        [sys.executable, "-m", "service.cli", *args],
        cwd=ROOT, env=environ, capture_output=True, text=True, timeout=600,
    )
    data = json.loads(proc.stdout) if proc.stdout.strip().startswith(("{", "[")) else None
    return proc.returncode, data, proc.stderr


def test_rerun_repeats_only_the_failed_test_and_shows_the_verdict(
    tmp_path: Path, gate: Path
) -> None:
    backend = write_pyonly_backend(tmp_path / "pyonly", {"test_suite.py": SUITE})
    home, mark = tmp_path / "home", gate  # where the sealed tests see it
    code, first, err = ootci(home, "run", "--torch", "installed", "--backend", str(backend),
                             "--json", FIXED_MARK=str(mark))
    assert code == 1, err
    (first,) = first  # `ootci run --json` prints a list of runs, one per torch spec
    assert first["state"] == "failed" and first["test_counts"] == {"failed": 1, "passed": 1}

    mark.touch()
    code, again, err = ootci(home, "rerun", str(first["id"]), "--json", FIXED_MARK=str(mark))
    assert code == 0, err
    assert again["state"] == "passed" and again["id"] != first["id"]
    assert again["test_counts"] == {"passed": 1}  # the failed test alone, not the suite

    code, _, err = ootci(home, "rerun", str(again["id"]))
    assert code == 2 and f"run {again['id']} is passed" in err
    code, _, err = ootci(home, "rerun", "999999")
    assert code == 2 and "no run 999999" in err
