"""Directories tests hand to real runs."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def world_readable_dir() -> Iterator[Path]:
    """pytest's tmp dirs are 0700 under root: the sandbox uid could not read the backend."""
    base = Path(tempfile.mkdtemp(prefix="ootci-run-"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)
