"""A patched overlay of the installed torch, as a ``path:`` spec: hard links of the
installed package, a version and git_version of its own, and the files a test patches
made private copies (the installed torch is never written through a link)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest


def installed_torch() -> Path:
    """The ``torch`` package of this interpreter, found without importing it."""
    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.submodule_search_locations, "no torch installed"
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def _rewrite(path: Path, edit: Callable[[str], str]) -> None:
    text = path.read_text()
    path.unlink()  # a private file now: the link to the installed torch is gone
    path.write_text(edit(text))


# torch/random.py's manual_seed, made to die like a C++ crash inside it: faulthandler's
# own SIGSEGV, so the innermost Python frame of the dump is manual_seed.
SEGFAULTING_MANUAL_SEED = "\n\ndef manual_seed(seed):\n    import faulthandler\n    faulthandler._sigsegv()\n"


def overlay_of_installed_torch(
    root: Path, version: str, git_version: str,
    patches: Mapping[str, Callable[[str], str]] | None = None,
) -> Path:
    """``root/torch``: the installed torch with ``version``/``git_version`` and each
    ``patches`` file (relative to the torch package) rewritten by its function. Returns
    ``root``, for ``path:<root>``. Skips when hard links cannot reach ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    # pytest's dirs are 0700: the sandbox uid every step runs as must read a path: torch.
    root.chmod(0o755)
    try:
        shutil.copytree(installed_torch(), root / "torch", copy_function=os.link)
    except shutil.Error as exc:  # EXDEV: tmp on another filesystem than the venv
        pytest.skip(f"cannot hard-link the installed torch into {root}: {exc.args[0][:1]}")
    original = importlib.metadata.version("torch")

    def versioned(text: str) -> str:
        assert f"__version__ = '{original}'" in text
        return (text.replace(f"__version__ = '{original}'", f"__version__ = '{version}'")
                + f"\ngit_version = '{git_version}'\n")

    _rewrite(root / "torch" / "version.py", versioned)
    for rel, edit in (patches or {}).items():
        _rewrite(root / "torch" / rel, edit)
    return root
