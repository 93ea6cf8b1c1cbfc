"""Who installs a torch env: uv, hard-linking every file from its package cache, or pip.

uv (a dependency of ootci, found through the ``uv`` package or on PATH) unpacks each wheel
once into its cache and links it into every env that needs it (``--link-mode hardlink``):
a second env of a torch the cache already holds costs seconds and a few MB, not a full copy
of the wheel. The cache is a setting (``Settings.package_cache_dir``): per worker by
default, or a volume the workers of a deployment share, so a wheel is fetched once for all
of them. Hard links need the cache and the envs on one filesystem; on another, uv copies.

uv does not stop two of its processes unpacking the same new wheel into one cache at the
same moment: each links its env to its own copy (measured: two CUDA torches provisioned at
once shared none of their 2.2 GB of common packages). So installs into a package cache
take turns (:meth:`Installer.taking_turns`): the second finds the first's wheels unpacked
and links them. Only a new torch env installs into the cache, so a wait is rare, and the
wait is for the very download the waiting install would otherwise repeat.

The linked files are the cache's own inodes: whatever writes into an env's file writes into
the cache and into every other env linked from it. ``envcache.py`` makes a finished env
read-only and the sandbox mounts it read-only; runs never write into it (``run_env.py``).

pip stays the fallback when uv is missing: a full copy per env, pip's download cache only.
"""

from __future__ import annotations

import fcntl
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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

    @contextmanager
    def taking_turns(self, log: Callable[[str], None]) -> Iterator[None]:
        """Held around an install into the package cache (see the module docstring). pip
        copies every file into the env anyway: nothing to share, no turn to take."""
        if self.uv is None:
            yield
            return
        self.package_cache.mkdir(parents=True, exist_ok=True)
        with (self.package_cache / f"{self.name}.install.lock").open("a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                log(f"ootci: waiting for another install into the package cache {self.cache_dir}"
                    " (its wheels are then linked, not unpacked again)")
                started = time.monotonic()
                fcntl.flock(lock, fcntl.LOCK_EX)
                log(f"ootci: waited {time.monotonic() - started:.0f} s for the package cache")
            yield

    def create_venv(self, venv: Path) -> list[str]:
        if self.uv is not None:
            # pip comes with the requirements (``install``): one resolution, not two.
            return [self.uv, "venv", "--python", sys.executable, str(venv)]
        return [sys.executable, "-m", "venv", str(venv)]

    def install(
        self, python: Path, requirements: list[str], extra_index: str, *, fresh: bool = False
    ) -> list[str]:
        """``fresh``: past the package cache (a private one for this install), for an env
        whose files were tampered with, and with them the cached files they link to.

        Wheels only (``--only-binary :all:``): this install runs as the worker, unsealed,
        and a wheel runs no code when installed, where an sdist's setup.py would run with
        the worker's rights. Every legitimate input here is a wheel (a torch build, the
        test and build tools), so an sdist is refused, never built (issue #33)."""
        if self.uv is not None:
            cmd = [self.uv, "pip", "install", "--python", str(python), "--link-mode", "hardlink",
                   # pip's rule, not uv's first-index rule: the newest version any index
                   # offers (a nightly index also carries old numpy and setuptools).
                   "--index-strategy", "unsafe-best-match", "--only-binary", ":all:",
                   *(["--no-cache"] if fresh else [])]
        else:
            cmd = [str(python), "-m", "pip", "install", "--disable-pip-version-check",
                   "--only-binary=:all:", *(["--no-cache-dir"] if fresh else [])]
        if extra_index:
            cmd += ["--extra-index-url", extra_index]
        # Recipes run `{python} -m pip install ...`: a uv venv needs pip installed.
        return [*cmd, *requirements, *(["pip"] if self.uv is not None else [])]
