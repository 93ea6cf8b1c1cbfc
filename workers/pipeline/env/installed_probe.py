"""The ``import torch`` probe of an ``installed`` torch, remembered while torch is unchanged.

``installed`` is the torch of ootci's own interpreter, probed (imported in a sandbox, 1-2 s)
for its version and to know it imports at all. Asked again on every run, that is the
largest part of a small backend's provision step. So the probe's answer is kept in the
cache's envs dir (read-only to every step) beside a fingerprint of the install: the stat
(size, mtime, inode) of every file at the top of the ``torch`` package, of its native
libraries (``torch/lib``) and of its ``dist-info`` (pip rewrites RECORD on every install).
Any reinstall, upgrade or replaced library changes it, and the probe runs again; a file
edited deep inside the package in place does not, and then the suite's own ``import torch``
is what reports it (the test step's ``probe_torch_import``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path

from workers.pipeline.cache.layout import envs_dir

FILE = "installed-probe.json"


def torch_dir() -> Path | None:
    """Where ootci's interpreter would import torch from, found without importing it."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def fingerprint(package: Path) -> str:
    """Changes when torch at ``package`` is reinstalled or a top-level file or native
    library of it is replaced (see the module docstring)."""
    digest = hashlib.sha256(f"{sys.executable}\0{sys.prefix}\0{package}\n".encode())
    dirs = [package, package / "lib", *sorted(package.parent.glob("torch-*.dist-info"))]
    for directory in dirs:
        with contextlib.suppress(FileNotFoundError):
            for entry in sorted(os.scandir(directory), key=lambda e: e.name):
                if entry.is_file(follow_symlinks=True):
                    st = entry.stat(follow_symlinks=True)
                    digest.update(
                        f"{entry.path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\n".encode())
    return digest.hexdigest()


def recalled(cache_dir: Path, print_: str) -> dict[str, str] | None:
    """The probe remembered for the install whose fingerprint is ``print_``; None when
    there is none, it was of another install, or the file is unreadable."""
    try:
        saved = json.loads((envs_dir(cache_dir) / FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or saved.get("fingerprint") != print_:
        return None
    probe = saved.get("probe")
    return dict(probe) if isinstance(probe, dict) else None


def remember(cache_dir: Path, print_: str, probe: dict[str, str]) -> None:
    """Keep ``probe`` for the install ``print_``; written whole or not at all."""
    path = envs_dir(cache_dir) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{FILE}.{os.getpid()}")
    partial.write_text(json.dumps({"fingerprint": print_, "probe": probe}))
    os.replace(partial, path)
