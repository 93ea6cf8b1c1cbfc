"""The environment a build, test or provision process starts with: constructed, never the
worker's.

The worker's environment holds ootci's secrets (the database URL with its password, the
broker, the API token, the webhook and GitHub secrets). Builds and tests run other
people's code, so a child gets only: PATH, a HOME and TMPDIR inside the run dir, a UTF-8
locale, ccache's cache dir, and the variables the operator allows through
(``Settings.child_env_passthrough``: proxies, package indexes, certificates). The pipeline
adds its own (PYTHONPATH, the plugin's variables) and the recipe's ``env`` on top.

The policy for the run in progress is set with :func:`child_environment` by the code that
runs a run; :func:`base_environ` of the current policy is what ``procs.child_env`` builds on.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from service.config import DEFAULT_CHILD_PASSTHROUGH, Settings, refused_passthrough


@dataclass(frozen=True)
class ChildEnvPolicy:
    home: Path
    tmpdir: Path
    passthrough: tuple[str, ...] = DEFAULT_CHILD_PASSTHROUGH

    @classmethod
    def for_run(cls, settings: Settings, run_dir: Path) -> ChildEnvPolicy:
        return cls(run_dir / "home", run_dir / "tmp", tuple(settings.child_env_passthrough))


def _default_ccache_dir(parent: Mapping[str, str]) -> str | None:
    """Where ccache keeps its cache for the worker: builds share it across runs and envs,
    and it must stay put when a build's HOME moves into its run dir."""
    if parent.get("CCACHE_DIR"):
        return parent["CCACHE_DIR"]
    home = parent.get("HOME")
    xdg = parent.get("XDG_CACHE_HOME") or (os.path.join(home, ".cache") if home else None)
    return os.path.join(xdg, "ccache") if xdg else None


def base_environ(
    policy: ChildEnvPolicy, parent: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment every child starts from (see the module docstring)."""
    parent = os.environ if parent is None else parent
    for directory in (policy.home, policy.tmpdir):
        directory.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": parent.get("PATH", os.defpath),
        "HOME": str(policy.home),
        "TMPDIR": str(policy.tmpdir),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }
    ccache = _default_ccache_dir(parent) if shutil.which("ccache", path=env["PATH"]) else None
    if ccache is not None:
        env["CCACHE_DIR"] = ccache
    for name in policy.passthrough:
        # Settings refuse these already; a policy built by other code must not differ.
        if refused_passthrough(name) is None and name in parent:
            env[name] = parent[name]
    return env


def default_policy() -> ChildEnvPolicy:
    """Outside a run (a step called on its own, a CLI probe): a private HOME and TMPDIR."""
    root = Path(tempfile.gettempdir()) / f"ootci-child-{os.getuid()}"
    return ChildEnvPolicy(root / "home", root / "tmp")


_current: ContextVar[ChildEnvPolicy | None] = ContextVar("ootci_child_env_policy", default=None)


def current_policy() -> ChildEnvPolicy:
    return _current.get() or default_policy()


@contextmanager
def child_environment(policy: ChildEnvPolicy) -> Iterator[ChildEnvPolicy]:
    """Children started inside this block (in this thread) get ``policy``'s environment."""
    token = _current.set(policy)
    try:
        yield policy
    finally:
        _current.reset(token)


def ootci_process_environ() -> dict[str, str]:
    """The worker's own environment, secrets included, for another ootci process (a corpus
    worker): never for a build, a test or anything else that runs foreign code."""
    return {**os.environ}
