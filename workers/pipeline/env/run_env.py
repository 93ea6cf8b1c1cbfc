"""Each run's own torch env: a thin venv in the run dir over the read-only base env.

The base (``provision.py``) is shared by every run of its torch and must never change, yet a
run installs into its env: the backend (``{python} -m pip install .``) and the suite's test
requirements. So the run gets a venv of its own, ``<run_dir>/env``, layered over the base's
site-packages (``layered.py``: the base's own ``.pth`` files still run, so an ``installed``
base chains to ootci's packages). Everything a run installs lands in its private venv; pip
leaves what the base holds alone ("outside environment"). The base is mounted read-only in
the build and test sandboxes and its write bits are cleared (``envcache.py``);
``TorchEnv.base_dirs`` names what to mount.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from service.config import Settings
from workers.pipeline.cache.layout import envs_dir
from workers.pipeline.env import envcache
from workers.pipeline.env.layered import layered_venv, purelib
from workers.pipeline.env.torch_env import TorchEnv

PTH = "_ootci_base_env.pth"


def private_env(base: TorchEnv, run_dir: Path) -> TorchEnv:
    """A fresh private venv over ``base`` at ``<run_dir>/env`` (an earlier attempt's is
    replaced: it may hold that attempt's half-installed backend)."""
    target = run_dir / "env"
    envcache.remove(target)
    python = layered_venv(target, [purelib(base.venv_dir)], pth=PTH)
    return replace(base, python=python, base_dirs=(base.venv_dir, *base.base_dirs))


def shared_read_only(settings: Settings, env: TorchEnv) -> list[Path]:
    """What no step of a run (or a shard of it) may write: every cached torch env (and its
    manifest), the package cache they are hard-linked from, and what the run's env overlays."""
    return [envs_dir(settings.resolved_cache_dir), settings.resolved_package_cache_dir,
            *env.base_dirs]
