"""Who installs a torch env: uv, hard-linking every file from its package cache, or pip.

uv (a dependency of ootci, found through the ``uv`` package or on PATH) unpacks each wheel
once into its cache and links it into every env that needs it (``--link-mode hardlink``):
a second env of a torch the cache already holds costs seconds and a few MB, not a full copy
of the wheel. The cache is a setting (``Settings.package_cache_dir``): per worker by
default, or a volume the workers of a deployment share, so a wheel is fetched once for all
of them. Hard links need the cache and the envs on one filesystem; on another, uv copies.

The linked files are the cache's own inodes: whatever writes into an env's file writes into
the cache and into every other env linked from it. ``envcache.py`` makes a finished env
read-only and the sandbox mounts it read-only; runs never write into it (``run_env.py``).

pip stays the fallback when uv is missing: a full copy per env, pip's download cache only.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path


def find_uv() -> str | None:
    """The uv binary of the installed ``uv`` package, else one on PATH, else None."""
    try:
        import uv  # the PyPI package ships the binary next to the module

        found = uv.find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = None
    return found or shutil.which("uv")


@dataclass(frozen=True)
class Installer:
    """The commands that create a venv and install requirements into it."""

    name: str  # "uv" | "pip"
    package_cache: Path
    uv: str | None = None

    @classmethod
    def detect(cls, package_cache: Path) -> Installer:
        uv = find_uv()
        return cls("uv", package_cache, uv) if uv else cls("pip", package_cache)

    @property
    def cache_dir(self) -> Path:
        return self.package_cache / self.name

    def environ(self) -> dict[str, str]:
        if self.uv is not None:
            # A wheel ootci installs is identified by the sha256 it checked just before, not
            # by its file name: PR build stores name wheels by template (a 2.14.0.dev+pr
            # build as torch-2.14.0-...whl), which pip accepts and uv would refuse.
            return {"UV_CACHE_DIR": str(self.cache_dir), "UV_LINK_MODE": "hardlink",
                    "UV_SKIP_WHEEL_FILENAME_CHECK": "1"}
        return {"PIP_CACHE_DIR": str(self.cache_dir)}

    def create_venv(self, venv: Path) -> list[str]:
        if self.uv is not None:
            # pip comes with the requirements (``install``): one resolution, not two.
            return [self.uv, "venv", "--python", sys.executable, str(venv)]
        return [sys.executable, "-m", "venv", str(venv)]

    def install(
        self, python: Path, requirements: list[str], extra_index: str, *, fresh: bool = False
    ) -> list[str]:
        """``fresh``: past the package cache (a private one for this install), for an env
        whose files were tampered with, and with them the cached files they link to."""
        if self.uv is not None:
            cmd = [self.uv, "pip", "install", "--python", str(python), "--link-mode", "hardlink",
                   # pip's rule, not uv's first-index rule: the newest version any index
                   # offers (a nightly index also carries old numpy and setuptools).
                   "--index-strategy", "unsafe-best-match", *(["--no-cache"] if fresh else [])]
        else:
            cmd = [str(python), "-m", "pip", "install", "--disable-pip-version-check",
                   *(["--no-cache-dir"] if fresh else [])]
        if extra_index:
            cmd += ["--extra-index-url", extra_index]
        # Recipes run `{python} -m pip install ...`: a uv venv needs pip installed.
        return [*cmd, *requirements, *(["pip"] if self.uv is not None else [])]
