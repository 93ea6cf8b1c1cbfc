"""Garbage collection of what a worker keeps on disk: torch environments, backend build
dirs and git mirrors in the cache dir, and the runs' own dirs in the work dir.

A nightly spec provisions a new torch environment every night (several GB for a CUDA
wheel), every backend push gets a new build dir, and every run leaves its dir behind (its
private venv, HOME and TMPDIR: some 150 MB for torch_openreg, mostly Inductor's kernel
cache), so a worker's disk fills within weeks unless something removes what is no longer
used. Whatever provisions or reuses an env, builds in a build dir, fetches into a mirror
or opens a step of a run stamps it (``layout.stamp``); :func:`collect_garbage` removes
entries whose stamp is older than ``max_age``, always keeping the ``keep`` most recently
used of each kind, and the build dirs of every env it removes. A run's logs are in the
database, not only in its dir, so removing the dir loses no log.

Safety: ``max_age`` is at least a day, far longer than a run (three steps with their own
timeouts), so an entry stamped by a running run is never old. An env or a mirror is
removed only under its lock (the one provisioning or fetching takes), taken without
waiting: one in use right now is skipped, and a reuse that stamped it in the meantime is
seen. The lock files stay: a process may already hold the path open to wait on it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from service.config import Settings
from workers.pipeline.cache.layout import (
    STAMP,
    build_env_prefix,
    builds_dir,
    env_lock,
    env_manifest,
    envs_dir,
    mirror_lock,
    mirrors_dir,
    runs_dir,
)

MIN_AGE = dt.timedelta(days=1)


@dataclass(frozen=True)
class Removed:
    path: Path
    kind: str  # "env" | "build" | "mirror" | "run"
    size_bytes: int
    last_used: float  # epoch seconds


@dataclass
class GcReport:
    removed: list[Removed] = field(default_factory=list)
    kept: int = 0
    skipped_busy: list[Path] = field(default_factory=list)
    dry_run: bool = False

    @property
    def freed_bytes(self) -> int:
        return sum(r.size_bytes for r in self.removed)


def remove_tree(path: Path) -> None:
    """Remove ``path``, also where its dirs are read-only (a finished env: envcache.py);
    a non-root worker cannot unlink inside a dir without its write bit. Files keep their
    modes: they may be the package cache's (hard links). What cannot be removed stays."""
    if not path.exists():
        return

    def writable_and_retry(func: Callable[..., object], failed: str, _exc: object) -> None:
        parent = os.path.dirname(failed)
        os.chmod(parent, os.stat(parent).st_mode | stat.S_IWUSR)
        if os.path.isdir(failed) and not os.path.islink(failed):
            os.chmod(failed, os.stat(failed).st_mode | stat.S_IWUSR)
        with contextlib.suppress(OSError):
            func(failed)

    shutil.rmtree(path, onerror=writable_and_retry)


def _last_used(entry: Path) -> float:
    # Entries from before stamping existed count from their own mtime.
    marker = entry / STAMP
    return (marker if marker.exists() else entry).stat().st_mtime


def _size(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
        except OSError:
            continue
    return total


def _envs(cache_dir: Path) -> list[Path]:
    root = envs_dir(cache_dir)
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def _builds(cache_dir: Path) -> list[Path]:
    root = builds_dir(cache_dir)
    if not root.is_dir():
        return []
    return sorted(b for recipe in root.iterdir() if recipe.is_dir() for b in recipe.iterdir() if b.is_dir())


def _mirrors(cache_dir: Path) -> list[Path]:
    root = mirrors_dir(cache_dir)
    return sorted(p for p in root.glob("*.git") if p.is_dir()) if root.is_dir() else []


def _run_dirs(work_dir: Path | None) -> list[Path]:
    if work_dir is None:
        return []
    root = runs_dir(work_dir)
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def _expired(entries: list[Path], cutoff: float, keep: int) -> Iterator[tuple[Path, float]]:
    by_recency = sorted(((e, _last_used(e)) for e in entries), key=lambda pair: -pair[1])
    for entry, used in by_recency[keep:]:
        if used < cutoff:
            yield entry, used


def _expired_and_free(
    entries: list[Path], lock_of: Callable[[Path], Path], cutoff: float, keep: int, report: GcReport
) -> Iterator[tuple[Path, float]]:
    """The expired entries, each while holding its lock: one whose lock is held right now
    is skipped (and reported), one reused while we were looking is left."""
    for entry, used in _expired(entries, cutoff, keep):
        with lock_of(entry).open("a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                report.skipped_busy.append(entry)
                continue
            if _last_used(entry) < cutoff:
                yield entry, used


def collect_garbage(
    cache_dir: Path,
    *,
    work_dir: Path | None = None,
    max_age: dt.timedelta,
    keep: int,
    dry_run: bool = False,
    now: float | None = None,
    log: Callable[[str], None] = lambda _line: None,
) -> GcReport:
    if max_age < MIN_AGE:
        raise ValueError(f"max_age must be at least {MIN_AGE} (longer than any run), got {max_age}")
    if keep < 0:
        raise ValueError(f"keep must be >= 0, got {keep}")
    cutoff = (time.time() if now is None else now) - max_age.total_seconds()
    report = GcReport(dry_run=dry_run)
    envs = _envs(cache_dir)
    removed_env_keys: set[str] = set()

    for env, used in _expired_and_free(envs, env_lock, cutoff, keep, report):
        report.removed.append(Removed(env, "env", _size(env), used))
        removed_env_keys.add(env.name)
        if not dry_run:
            log(f"ootci gc: removing env {env}")
            with contextlib.suppress(OSError):
                remove_tree(env)
            env_manifest(env).unlink(missing_ok=True)

    mirrors = _mirrors(cache_dir)
    for mirror, used in _expired_and_free(mirrors, mirror_lock, cutoff, keep, report):
        report.removed.append(Removed(mirror, "mirror", _size(mirror), used))
        if not dry_run:
            log(f"ootci gc: removing git mirror {mirror}")
            shutil.rmtree(mirror, ignore_errors=True)

    builds = _builds(cache_dir)
    # The build dirs of a removed env go with it.
    orphaned = {b for b in builds if any(key.startswith(build_env_prefix(b)) for key in removed_env_keys)}
    expired = {b for b, _ in _expired(builds, cutoff, keep)}
    for build in sorted(orphaned | expired):
        report.removed.append(Removed(build, "build", _size(build), _last_used(build)))
        if not dry_run:
            log(f"ootci gc: removing build dir {build}")
            shutil.rmtree(build, ignore_errors=True)

    runs = _run_dirs(work_dir)
    for run_dir, used in _expired(runs, cutoff, keep):
        report.removed.append(Removed(run_dir, "run", _size(run_dir), used))
        if not dry_run:
            log(f"ootci gc: removing run dir {run_dir}")
            # A test step may have left read-only dirs (a suite's fixtures, a venv's).
            with contextlib.suppress(OSError):
                remove_tree(run_dir)

    gone = {r.path for r in report.removed}
    report.kept = sum(1 for e in envs + mirrors + builds + runs if e not in gone)
    return report


def collect_garbage_per_settings(
    settings: Settings,
    *,
    max_age_days: int | None = None,
    keep: int | None = None,
    dry_run: bool = False,
    log: Callable[[str], None] = lambda _line: None,
) -> GcReport:
    """:func:`collect_garbage` on the settings' cache dir, with the settings' policy unless
    overridden."""
    days = settings.cache_max_age_days if max_age_days is None else max_age_days
    return collect_garbage(
        settings.resolved_cache_dir,
        work_dir=settings.resolved_work_dir,
        max_age=dt.timedelta(days=days),
        keep=settings.cache_keep if keep is None else keep,
        dry_run=dry_run,
        log=log,
    )
