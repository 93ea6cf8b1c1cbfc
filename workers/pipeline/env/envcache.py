"""A cached torch env stays what it was made as: read-only, and checked before each reuse.

A base env is shared by every run of its torch (and, hard-linked by uv, with the package
cache and every other env of the same wheels). Runs get private overlays of it
(``run_env.py``) and the sandbox mounts it read-only; on top of that, when an env is
finished its files and dirs lose their write bits and a manifest is recorded next to it
(``<envs>/<key>.manifest.json``, outside the env): every file's type, size, mtime, inode and
mode, the target of every symlink, and the full sha256 of what Python runs at startup
(``*.pth``, ``sitecustomize.py``, ``usercustomize.py``). ``verify`` compares the env with
it before reuse; a difference is tampering and the env is rebuilt, never used.

Bytecode: an interpreter that may write (a worker without bwrap, as root) leaves new
``__pycache__/*.pyc`` files behind when it imports a module the env had not compiled.
Those are removed on verify rather than counted as tampering: they are a cache, and a
removed one is only recompiled. A changed ``.pyc`` the manifest recorded is tampering.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from workers.pipeline.cache.gc import remove_tree
from workers.pipeline.cache.layout import STAMP, env_manifest
from workers.pipeline.env.digest import sha256_file

_STARTUP_NAMES = frozenset({"sitecustomize.py", "usercustomize.py"})
_WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


def _runs_at_startup(name: str) -> bool:
    return name.endswith(".pth") or name in _STARTUP_NAMES


def _entries(env: Path) -> dict[str, list[object]]:
    """rel path -> [kind, size, mtime_ns, inode, mode, symlink target or sha256 or ""]."""
    found: dict[str, list[object]] = {}
    for dirpath, dirnames, filenames in os.walk(env):
        dirnames.sort()
        for name in [*filenames, *(d for d in dirnames if os.path.islink(os.path.join(dirpath, d)))]:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, env)
            if rel == STAMP:
                continue  # touched on every reuse
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ["link", 0, 0, 0, 0, os.readlink(full)]
                continue
            extra = sha256_file(Path(full)) if _runs_at_startup(name) else ""
            found[rel] = ["file", st.st_size, st.st_mtime_ns, st.st_ino, stat.S_IMODE(st.st_mode),
                          extra]
    return found


def make_read_only(env: Path) -> None:
    """Clear the write bits of every file and dir of ``env`` (the stamp excepted). For
    hard-linked files this is the package cache's inode too, which is what is wanted."""
    for dirpath, dirnames, filenames in os.walk(env, topdown=False):
        for name in [*filenames, *dirnames]:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode) or os.path.relpath(full, env) == STAMP:
                continue
            os.chmod(full, stat.S_IMODE(st.st_mode) & ~_WRITE_BITS)
    os.chmod(env, stat.S_IMODE(os.lstat(env).st_mode) & ~_WRITE_BITS)


def remove(env: Path) -> None:
    """Remove ``env`` even where its dirs are read-only (``cache.gc.remove_tree``)."""
    with contextlib.suppress(OSError):
        remove_tree(env)


def record(env: Path) -> None:
    """Write the manifest of a finished (read-only) env."""
    env_manifest(env).write_text(json.dumps(_entries(env), sort_keys=True))


@dataclass(frozen=True)
class Verdict:
    intact: bool
    changes: tuple[str, ...] = ()  # what differs, for the log (at most a few)
    removed_bytecode: int = 0


def _is_new_bytecode(rel: str) -> bool:
    parts = Path(rel).parts
    return len(parts) >= 2 and parts[-2] == "__pycache__" and rel.endswith(".pyc")


def verify(env: Path, *, show: int = 5) -> Verdict:
    """Compare ``env`` with its manifest; new bytecode files are removed (see the module
    docstring), anything else that differs is a change."""
    path = env_manifest(env)
    if not path.is_file():
        return Verdict(False, ("no manifest",))
    recorded: dict[str, list[object]] = json.loads(path.read_text())
    current = _entries(env)
    changes: list[str] = []
    stray = 0
    for rel in sorted(current.keys() - recorded.keys()):
        if _is_new_bytecode(rel):
            os.unlink(env / rel)
            stray += 1
        else:
            changes.append(f"added {rel}")
    changes += [f"removed {rel}" for rel in sorted(recorded.keys() - current.keys())]
    changes += [
        f"changed {rel}" for rel in sorted(recorded.keys() & current.keys())
        if recorded[rel] != current[rel]
    ]
    return Verdict(not changes, tuple(changes[:show]) + (
        (f"... {len(changes) - show} more",) if len(changes) > show else ()), stray)


def _bytecode(root: Path) -> list[str]:
    return [
        os.path.relpath(os.path.join(dirpath, name), root)
        for dirpath, _dirs, files in os.walk(root) if os.path.basename(dirpath) == "__pycache__"
        for name in files if name.endswith(".pyc")
    ]


def adopt_bytecode(env: Path, store: Path) -> int:
    """Hard-link the bytecode an earlier env of the same key compiled (``share_bytecode``)
    into a new ``env``: importing torch without it compiles ~800 modules (10+ s), and
    uv links sources, not bytecode. A .pyc is valid for its source by the source's mtime
    and size, which the hard-linked source shares. Returns how many were linked."""
    if not store.is_dir():
        return 0
    linked = 0
    for rel in _bytecode(store):
        target = env / rel
        if target.parent.parent.is_dir() and not target.exists():
            target.parent.mkdir(exist_ok=True)
            try:
                os.link(store / rel, target)
                linked += 1
            except OSError:
                continue  # another filesystem: the probe compiles it
    return linked


def share_bytecode(env: Path, store: Path) -> None:
    """Keep ``env``'s compiled bytecode in ``store`` (hard links) for the next env of its key."""
    for rel in _bytecode(env):
        target = store / rel
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(env / rel, target)
            except OSError:
                return
