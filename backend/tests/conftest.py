"""Shared fixtures of the torch_openreg contract suite.

The package is imported explicitly (not only through autoload) so the suite
also runs with TORCH_DEVICE_BACKEND_AUTOLOAD=0; test_autoload.py checks the
entry point in fresh interpreters.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

# `python -m pytest tests` run from backend/ (ootci's recipe) puts backend/ first
# on sys.path, so `torch_openreg` would resolve to the source tree, whose
# libraries (if any) come from the last editable build, possibly against
# another torch. Test the installed package instead; an editable install still
# maps to the source tree through its own import hook.
_SOURCE_ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [p for p in sys.path if Path(p or os.curdir).resolve() != _SOURCE_ROOT]

import pytest  # noqa: E402
import torch  # noqa: E402

import torch_openreg  # noqa: E402,F401

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


def run_python(code: str, *, env: dict[str, str] | None = None, timeout: float = 180,
               fresh: bool = False) -> subprocess.CompletedProcess[str]:
    """Run `code` as `python -c` would (for crash, fork and subprocess tests): by default
    in a fork of the preloaded interpreter (_preloaded.py: the same exit status, output
    and environment, without paying `import torch` again); in a fresh interpreter when
    `fresh` or when `env` changes what the import itself reads (see _preloaded.py)."""
    import _preloaded  # here: keeps this change to run_python

    full_env = dict(os.environ)
    full_env.update(env or {})
    code = textwrap.dedent(code)
    # Not from backend/: `-c` puts the cwd on sys.path (see the top of this file).
    cwd = tempfile.gettempdir()
    if not fresh and (done := _preloaded.run(code, env=full_env, cwd=cwd,
                                              timeout=timeout)) is not None:
        return done
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, timeout=timeout, env=full_env, cwd=cwd,
    )


@pytest.fixture
def python():
    return run_python
