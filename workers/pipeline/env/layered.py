"""A thin venv layered over other site dirs: how ootci gives an interpreter a
site-packages of its own without copying what it builds on.

The venv is created without pip in a fraction of a second, for the interpreter running
ootci; one ``.pth`` file in its site-packages adds each parent site dir *behind* its own
with ``site.addsitedir`` (not a plain path line), so the parents' own ``.pth`` files run
too: an editable install stays whole, and a parent that is itself layered chains on.
Whatever is installed into the venv lands in its own site-packages and comes first; pip
leaves what a parent holds alone ("outside environment").

Used for a run's private env over its shared base env (``run_env.py``) and for the
overlay env of an ``installed`` or ``path:`` spec over ootci's own packages
(``provision.py``).
"""

from __future__ import annotations

import sysconfig
import venv as venv_lib
from collections.abc import Sequence
from pathlib import Path


def purelib(prefix: Path) -> Path:
    """The site-packages of the venv (or Python prefix) at ``prefix``."""
    return Path(sysconfig.get_paths(vars={"base": str(prefix), "platbase": str(prefix)})["purelib"])


def layered_venv(venv: Path, parents: Sequence[Path | str], *, pth: str) -> Path:
    """A fresh venv at ``venv`` (one already there is replaced) whose site-packages hold
    the file ``pth`` adding each of ``parents`` behind its own. Returns its python."""
    venv_lib.EnvBuilder(with_pip=False, symlinks=True, clear=True).create(venv)
    site_packages = purelib(venv)
    site_packages.mkdir(parents=True, exist_ok=True)
    (site_packages / pth).write_text(
        "".join(f"import site; site.addsitedir({str(parent)!r})\n" for parent in parents)
    )
    return venv / "bin" / "python"
