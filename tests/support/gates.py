"""A gate a sealed test step can see: a file the integration test creates when the suite
may go on. Not under pytest's tmp dirs: a step's /tmp is its run's TMPDIR, the host's /tmp
is not visible in the sandbox (workers/pipeline/isolation/sandbox.py)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(name="gate")
def gate_fixture() -> Iterator[Path]:
    """The gate's path (not created yet), in a fresh dir under /var/tmp any uid can read."""
    where = Path(tempfile.mkdtemp(prefix="ootci-gate-", dir="/var/tmp"))
    where.chmod(0o755)
    yield where / "gate"
    shutil.rmtree(where, ignore_errors=True)
