"""A ``path:`` torch for tests: the installed torch, hard-linked, with its own version and
any of its files patched (a fresh inode each, so the installed torch is untouched)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

# torch/random.py's manual_seed, made to die like a C++ crash inside it: faulthandler's
# own SIGSEGV, so the innermost Python frame of the dump is manual_seed.
SEGFAULTING_MANUAL_SEED = "\n\ndef manual_seed(seed):\n    import faulthandler\n    faulthandler._sigsegv()\n"


def overlay_of_installed_torch(
    root: Path, version: str, git_version: str,
    patches: Mapping[str, Callable[[str], str]] | None = None,
) -> Path:
    """``root/overlay`` holding ``torch/``: the installed torch with ``version`` and
    ``git_version``, and each file of ``patches`` (relative to ``torch/``) replaced by what
    its function makes of its text. Skips the test when tmp cannot hard-link the venv."""
    installed = Path(importlib.util.find_spec("torch").origin).parent  # type: ignore[arg-type,union-attr]
    overlay = root / "overlay"
    try:
        shutil.copytree(installed, overlay / "torch", copy_function=os.link)
    except shutil.Error as exc:  # EXDEV: tmp on another filesystem than the venv
        pytest.skip(f"cannot hard-link the installed torch into {root}: {exc.args[0][:1]}")
    original = importlib.metadata.version("torch")

    def version_py(text: str) -> str:
        assert f"__version__ = '{original}'" in text
        patched = text.replace(f"__version__ = '{original}'", f"__version__ = '{version}'")
        return patched + f"\ngit_version = '{git_version}'\n"

    for rel, patch in {"version.py": version_py, **(patches or {})}.items():
        path = overlay / "torch" / rel
        text = path.read_text()
        path.unlink()  # a hard link: writing through it would patch the installed torch
        path.write_text(patch(text))
    return overlay
