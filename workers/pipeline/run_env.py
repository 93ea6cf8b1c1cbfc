"""Each run's own torch env: a thin venv in the run dir over the read-only base env.

The base (``provision.py``) is shared by every run of its torch and must never change, yet a
run installs into its env: the backend (``{python} -m pip install .``) and the suite's test
requirements. So the run gets a venv of its own, ``<run_dir>/env``, whose site-packages hold
one ``.pth`` that adds the base's site-packages behind its own (``site.addsitedir``, so the
base's own ``.pth`` files still run: an ``installed`` base chains to ootci's packages).
Everything a run installs lands in its private venv; pip leaves what the base holds alone
("outside environment"). The base is mounted read-only in the build and test sandboxes and
its write bits are cleared (``envcache.py``); ``TorchEnv.base_dirs`` names what to mount.
"""

from __future__ import annotations

import sysconfig
import venv
from dataclasses import replace
from pathlib import Path

from service.config import Settings
from workers.pipeline import envcache
from workers.pipeline.types import TorchEnv

PTH = "_ootci_base_env.pth"


def _purelib(prefix: Path) -> Path:
    return Path(sysconfig.get_paths(vars={"base": str(prefix), "platbase": str(prefix)})["purelib"])


def private_env(base: TorchEnv, run_dir: Path) -> TorchEnv:
    """A fresh private venv over ``base`` at ``<run_dir>/env`` (an earlier attempt's is
    replaced: it may hold that attempt's half-installed backend)."""
    base_prefix = base.python.parent.parent  # <venv>/bin/python
    target = run_dir / "env"
    envcache.remove(target)
    venv.EnvBuilder(with_pip=False, symlinks=True, clear=True).create(target)
    purelib = _purelib(target)
    purelib.mkdir(parents=True, exist_ok=True)
    (purelib / PTH).write_text(f"import site; site.addsitedir({str(_purelib(base_prefix))!r})\n")
    return replace(
        base, python=target / "bin" / "python", base_dirs=(base_prefix, *base.base_dirs)
    )


def shared_read_only(settings: Settings, env: TorchEnv) -> list[Path]:
    """What no step of a run (or a shard of it) may write: every cached torch env (and its
    manifest), the package cache they are hard-linked from, and what the run's env overlays."""
    return [settings.resolved_cache_dir / "envs", settings.resolved_package_cache_dir,
            *env.base_dirs]
