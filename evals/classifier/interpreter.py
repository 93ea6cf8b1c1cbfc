"""A throwaway interpreter per live mutant run.

The bundled backend's recipe installs torch_openreg into the interpreter that runs the
pipeline (``pip install .``), and torch autoloads every installed backend on ``import
torch``. A mutant build (one whose .so has an undefined symbol, say) installed into a
shared environment would therefore break every later build and test that imports torch,
including other engineers' and the next mutant's. Each mutant gets its own venv instead:
created without pip in a fraction of a second, it sees this interpreter's packages (pip,
setuptools, pytest, numpy, ootci itself) through a ``.pth`` and receives the mutant build
of torch_openreg in its own site-packages, which comes first.
"""

from __future__ import annotations

import site
import subprocess
import sys
import sysconfig
from pathlib import Path

from evals.mutants.edits import MutantError

PTH_NAME = "ootci_parent_site.pth"


def make_isolated_python(directory: Path) -> Path:
    """Create a venv at ``directory`` layered over this interpreter's site-packages and
    return its python."""
    proc = subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(directory)],
        capture_output=True, text=True, timeout=120,
    )
    if proc.returncode != 0:
        raise MutantError(f"cannot create a venv at {directory}: {proc.stderr.strip()}")
    python = directory / "bin" / "python"
    purelib = Path(
        sysconfig.get_path("purelib", vars={"base": str(directory), "platbase": str(directory)})
    )
    parents = [p for p in site.getsitepackages() if Path(p).is_dir()]
    # addsitedir (not a bare path line) so the parent's own .pth files run too: the
    # editable install of ootci is one.
    lines = "".join(f"import site; site.addsitedir({p!r})\n" for p in parents)
    (purelib / PTH_NAME).write_text(lines, encoding="utf-8")
    return python
