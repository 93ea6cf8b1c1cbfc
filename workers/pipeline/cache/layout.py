"""Where a worker keeps things on disk, and the lock that guards each: the one place that
names them.

Under the cache dir (``Settings.cache_dir``), shared by every run of the worker:

- ``envs/<key>``: a torch env (``env/provision.py``), with ``envs/<key>.lock`` (held while
  it is provisioned, and by the GC removing it) and ``envs/<key>.manifest.json`` (what it
  was made as, ``env/envcache.py``);
- ``builds/<recipe>/<env key prefix>-<source key>``: a backend's build dir per (torch env,
  backend source);
- ``git/<url hash>.git``: the bare mirror of a git backend, with ``git/<url hash>.lock``
  (held by a fetch, and by the GC removing it);
- ``sources/<backend>/<key>``: the run trees made from a backend's source (``.lock``,
  ``.ready`` beside each, ``steps/source_tree.py``);
- ``wheels/<url hash>/<file>``: downloaded wheels (``env/resolve.py``);
- ``packages``: the installer's package cache when ``Settings.package_cache_dir`` is not
  set, with ``bytecode/<env key>`` (what the first env of a key compiled).

Under the work dir (``Settings.work_dir``): ``runs/<run id>``, a run's own dir (its private
env, HOME, TMPDIR, step logs, and the dirs of its shards).

Whatever is used is stamped (:func:`stamp`): the GC (``gc.py``) removes what has not been
used for a while.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

STAMP = ".ootci-last-used"
RUNS = "runs"


def stamp(entry: Path) -> None:
    """Record that ``entry`` (an env, a build or run dir, a mirror) was used now."""
    entry.mkdir(parents=True, exist_ok=True)
    (entry / STAMP).touch()


def envs_dir(cache_dir: Path) -> Path:
    return cache_dir / "envs"


def env_dir(cache_dir: Path, key: str) -> Path:
    return envs_dir(cache_dir) / key


def env_lock(env: Path) -> Path:
    """The lock provisioning ``env`` holds (env/provision.py) and the GC takes."""
    return env.parent / f"{env.name}.lock"


def env_manifest(env: Path) -> Path:
    """What ``env`` was made as (env/envcache.py): beside it, not in it."""
    return env.parent / f"{env.name}.manifest.json"


def builds_dir(cache_dir: Path) -> Path:
    return cache_dir / "builds"


def build_dir(cache_dir: Path, recipe_name: str, env_key: str, source_key: str) -> Path:
    """One build dir per (torch env, backend source). The name starts with the env key, so
    the build dirs of a removed env can be found (:func:`build_env_prefix`)."""
    return builds_dir(cache_dir) / recipe_name / f"{env_key[:16]}-{source_key}"


def build_env_prefix(build: Path) -> str:
    """The start of the env key a build dir was made for."""
    return build.name.split("-", 1)[0]


def mirrors_dir(cache_dir: Path) -> Path:
    return cache_dir / "git"


def mirror_dir(cache_dir: Path, url: str) -> Path:
    """The bare mirror of the git repository at ``url``."""
    return mirrors_dir(cache_dir) / (hashlib.sha256(url.encode()).hexdigest()[:16] + ".git")


def mirror_lock(mirror: Path) -> Path:
    """The lock a fetch into ``mirror`` holds (steps/source_tree.py) and the GC takes."""
    return mirror.with_suffix(".lock")


def source_trees_dir(cache_dir: Path, backend_name: str) -> Path:
    """Where the run trees of a backend's source are made (steps/source_tree.py)."""
    return cache_dir / "sources" / backend_name


def pytest_config_stop(cache_dir: Path) -> Path:
    """An empty ``pytest.ini`` above every run tree. pytest looks for its config from the
    tests upward and takes the first it finds: a backend without one of its own would
    otherwise get whatever config sits above ootci's home (the checkout of the project
    that holds ``./.ootci``: its addopts, markers, conftest.py), which a run of the same
    backend elsewhere never sees. A config of the backend's own is closer, so it wins."""
    return cache_dir / "sources" / "pytest.ini"


def wheel_file(cache_dir: Path, url: str, name: str) -> Path:
    """Where a wheel downloaded from ``url`` is kept, under its own file ``name``."""
    return cache_dir / "wheels" / hashlib.sha256(url.encode()).hexdigest()[:16] / name


def default_package_cache(cache_dir: Path) -> Path:
    """The installer's package cache when the settings name none."""
    return cache_dir / "packages"


def bytecode_store(package_cache: Path, env_key: str) -> Path:
    """The bytecode the first env of ``env_key`` compiled, for the next one to link."""
    return package_cache / "bytecode" / env_key


def runs_dir(work_dir: Path) -> Path:
    return work_dir / RUNS


def run_dir(work_dir: Path, run_id: int) -> Path:
    """Where a run (and the shards other workers run for it) keeps its venv, HOME, TMPDIR
    and streaming logs."""
    return runs_dir(work_dir) / str(run_id)
