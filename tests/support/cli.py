"""The command lines as a user runs them: ``python -m service.cli`` (``ootci``) and
``python -m evals`` in a subprocess from the repository root, without the ``OOTCI_*``
variables of the calling shell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.paths import REPO_ROOT


def run_module(
    module: str, home: Path, *args: str, timeout: float = 300, **env: str
) -> subprocess.CompletedProcess[str]:
    """``python -m MODULE ARGS...`` with ``OOTCI_HOME=home``; ``env`` adds variables."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    environ.update({"OOTCI_HOME": str(home), "COLUMNS": "200", **env})
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT, env=environ, capture_output=True, text=True, timeout=timeout,
    )


def ootci(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``ootci ARGS...`` with its home in ``tmp_path/home``."""
    return run_module("service.cli", tmp_path / "home", *args, **env)


def ootci_at(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``ootci ARGS...`` with ``OOTCI_HOME=home``."""
    return run_module("service.cli", home, *args, **env)


def evals(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m evals ARGS...`` with its home in ``tmp_path/home``."""
    return run_module("evals", tmp_path / "home", *args, **env)


def ootci_json(env: dict[str, str], *args: str) -> tuple[int, Any, str]:
    """``ootci ARGS...`` with exactly the ``OOTCI_*`` settings in ``env``: its exit code,
    its stdout as JSON (None when it printed none) and its stderr."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    environ.update({"COLUMNS": "200", **env})
    proc = subprocess.run([sys.executable, "-m", "service.cli", *args], cwd=REPO_ROOT,
                          env=environ, capture_output=True, text=True, timeout=600)
    data = json.loads(proc.stdout) if proc.stdout.strip()[:1] in ("{", "[") else None
    return proc.returncode, data, proc.stderr
