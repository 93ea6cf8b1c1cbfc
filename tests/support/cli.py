"""The command lines as a user runs them: ``python -m service.cli`` (``ootci``) and
``python -m evals`` in a subprocess from the repository root, with no ``OOTCI_*`` variable of
the calling shell and ``OOTCI_HOME`` under the test's tmp dir."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO_ROOT


def run_module(module: str, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    environ.update({"OOTCI_HOME": str(tmp_path / "home"), "COLUMNS": "200", **env})
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT, env=environ, capture_output=True, text=True, timeout=300,
    )


def ootci(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``ootci ARGS...``; ``env`` adds variables (``OOTCI_DATABASE_URL=...``)."""
    return run_module("service.cli", tmp_path, *args, **env)


def evals(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m evals ARGS...``."""
    return run_module("evals", tmp_path, *args, **env)
