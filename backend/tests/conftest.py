"""Shared fixtures of the torch_openreg contract suite.

The package is imported explicitly (not only through autoload) so the suite
also runs with TORCH_DEVICE_BACKEND_AUTOLOAD=0; test_autoload.py checks the
entry point in fresh interpreters.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_openreg  # noqa: F401

DEVICE = torch.device("openreg", 0)


@pytest.fixture
def device() -> torch.device:
    return DEVICE


@pytest.fixture
def two_devices() -> tuple[torch.device, torch.device]:
    if torch.openreg.device_count() < 2:
        pytest.skip("needs 2 openreg devices (OPENREG_DEVICE_COUNT)")
    return torch.device("openreg", 0), torch.device("openreg", 1)


@pytest.fixture(autouse=True)
def _restore_device_state():
    """Each test starts on device 0 with default streams, whatever the last one did."""
    yield
    for i in range(torch.openreg.device_count()):
        torch.openreg.set_stream(torch.openreg.default_stream(i))
        torch.openreg.synchronize(i)
    torch.openreg.set_device(0)


def run_python(code: str, *, env: dict[str, str] | None = None, timeout: float = 120
               ) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter (for crash, fork and autoload tests)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=timeout, env=full_env,
    )


@pytest.fixture
def python():
    return run_python
