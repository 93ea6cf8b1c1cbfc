"""Diagnostic imports that cannot lie about what failed.

When a test run dies before any test, ootci asks the environment itself why: first
``import torch`` with backend autoload off (does torch itself work?), then with autoload on
(does the backend load?). Each probe

- runs from a neutral, empty working directory with ``python -P`` and ``PYTHONSAFEPATH=1``,
  so only the env's site-packages are importable: a backend's source tree (its un-built
  ``torch_vendor/`` package next to ``setup.py``) cannot shadow the installed package and
  turn the real error into a "partially initialized module" circular import;
- prints the full traceback, then the *innermost* exception of the chain (``__cause__``,
  else the implicit ``__context__``) on the line after ``INNERMOST_MARKER``: torch's autoload
  wraps every backend failure in ``RuntimeError: Failed to load the backend extension``,
  and the loader's own words (an undefined symbol, a wrong ELF class, a missing library)
  are only in the cause.

The innermost line is the decisive line ootci classifies; an undefined symbol is followed by
its demangled name (``c++filt``), the name a human can look up in torch's headers.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from workers.pipeline.isolation.sandbox import StepSandbox, run_captured

INNERMOST_MARKER = "ootci-probe: innermost cause:"
# The probe's exit code for "the import raised": anything else is the interpreter dying.
RAISED = 3
# Written before the innermost line when torch itself (autoload off) does not import.
TORCH_ITSELF = "ootci: torch itself does not import (TORCH_DEVICE_BACKEND_AUTOLOAD=0):"
DEMANGLED = "ootci: the undefined symbol demangled:"

# Runs in the env's interpreter, so it must work on every Python the env may have.
_SCRIPT = r"""
import sys, traceback
try:
    __import__(sys.argv[1])
except BaseException as exc:
    traceback.print_exc()
    inner, seen = exc, set()
    while id(inner) not in seen:
        seen.add(id(inner))
        nxt = inner.__cause__
        if nxt is None and not inner.__suppress_context__:
            nxt = inner.__context__
        if nxt is None:
            break
        inner = nxt
    text = str(inner).strip().splitlines()
    sys.stderr.write("%s\n%s: %s\n" % (sys.argv[2], type(inner).__name__, text[0] if text else ""))
    sys.exit(int(sys.argv[3]))
"""

_UNDEFINED = re.compile(r"undefined symbol: (\S+)")


@dataclass(frozen=True)
class ProbeResult:
    """What one diagnostic import said; ``innermost`` is None when it did not raise."""

    returncode: int
    output: str
    innermost: str | None

    @property
    def failed(self) -> bool:
        return self.returncode != 0


def demangle(symbol: str) -> str | None:
    """The C++ name of a mangled symbol, or None (not mangled, or no c++filt)."""
    cxxfilt = shutil.which("c++filt")
    if cxxfilt is None or not symbol.startswith("_Z"):
        return None
    try:
        proc = subprocess.run([cxxfilt, symbol], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    name = proc.stdout.strip()
    return name if proc.returncode == 0 and name and name != symbol else None


def probe_import(
    python: Path,
    module: str,
    environ: Mapping[str, str],
    neutral_dir: Path,
    *,
    sandbox: StepSandbox | None = None,
    timeout_s: float = 300,
) -> ProbeResult:
    """Import ``module`` with ``python`` in ``environ`` from ``neutral_dir`` (created empty
    if missing). Raises OSError / TimeoutExpired when the interpreter cannot be run, and
    ``SandboxUnusable`` when the ``sandbox`` cannot be set up."""
    neutral_dir.mkdir(parents=True, exist_ok=True)
    command = [str(python), "-P", "-c", _SCRIPT, module, INNERMOST_MARKER, str(RAISED)]
    env = {**environ, "PYTHONSAFEPATH": "1"}
    # Sealed, bwrap's own failure to start it is SandboxUnusable, never a failed import.
    proc = run_captured(sandbox, command, cwd=neutral_dir, env=env, timeout_s=timeout_s)
    output = (proc.stdout + proc.stderr).strip()
    innermost = None
    if proc.returncode == RAISED:
        lines = output.splitlines()
        at = max((i for i, line in enumerate(lines) if line == INNERMOST_MARKER), default=-1)
        if 0 <= at < len(lines) - 1:
            innermost = lines[at + 1]
    return ProbeResult(proc.returncode, output, innermost)


def decisive_text(result: ProbeResult, *, torch_itself: bool) -> str:
    """The lines ootci classifies, decisive first: the innermost cause (marked when it is
    torch's own), the demangled symbol, then the probe's whole output for context."""
    head: list[str] = []
    if result.innermost is not None:
        head.append(f"{TORCH_ITSELF} {result.innermost}" if torch_itself else result.innermost)
        m = _UNDEFINED.search(result.innermost)
        name = demangle(m.group(1)) if m else None
        if name is not None:
            head.append(f"{DEMANGLED} {name}")
    elif torch_itself:
        head.append(f"{TORCH_ITSELF} the interpreter exited with {result.returncode}")
    return "\n".join([*head, result.output]) if head else result.output


def without_autoload(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` in which torch loads no device backend: torch alone is asked."""
    return {**environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}


__all__ = [
    "DEMANGLED",
    "INNERMOST_MARKER",
    "TORCH_ITSELF",
    "ProbeResult",
    "decisive_text",
    "demangle",
    "probe_import",
    "without_autoload",
]
