"""A throwaway interpreter per live mutant run.

The bundled backend's recipe installs torch_openreg into the interpreter that runs the
pipeline (``pip install .``), and torch autoloads every installed backend on ``import
torch``. A mutant build (one whose .so has an undefined symbol, say) installed into a
shared environment would therefore break every later build and test that imports torch,
including other engineers' and the next mutant's. Each mutant gets its own venv instead,
layered over this interpreter's site-packages (pip, setuptools, pytest, numpy, ootci
itself) the way the pipeline layers every env (``layered_venv``): the mutant build of
torch_openreg lands in its own site-packages, which comes first.
"""

from __future__ import annotations

import site
from pathlib import Path

from evals.mutants.edits import MutantError
from workers.pipeline.env.layered import layered_venv

PTH_NAME = "ootci_parent_site.pth"


def make_isolated_python(directory: Path) -> Path:
    """Create a venv at ``directory`` layered over this interpreter's site-packages and
    return its python."""
    parents = [p for p in site.getsitepackages() if Path(p).is_dir()]
    try:
        return layered_venv(directory, parents, pth=PTH_NAME)
    except OSError as exc:
        raise MutantError(f"cannot create a venv at {directory}: {exc}") from None
