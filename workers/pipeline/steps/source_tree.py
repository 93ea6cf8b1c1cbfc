"""The tree a run builds: never the registered source itself, always a fresh copy of it.

A build writes into its source dir (setuptools' ``build/``, egg-info, generated files), and a
hostile one could rewrite it; so every run gets its own tree (issue #14 item 2):

- a git backend (``source`` is a URL): the worker keeps one bare mirror of the repository
  under its cache dir, fetches into it, and checks the run's exact commit out into a new
  detached worktree;
- a directory backend: a copy of the directory without ``.git`` and build output.

The tree's path depends only on the source's content key (not on the run), so a build dir
reused by the next run of the same source sees the same source path (CMake records it).
Runs of one key at the same time share its tree (a file lock counts them); the first makes
it afresh and the last removes it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from service.sources import git_environ, is_git_url, subdir_problem
from workers.pipeline.cache.layout import (
    mirror_dir,
    mirror_lock,
    pytest_config_stop,
    source_trees_dir,
    stamp,
)
from workers.pipeline.errors import GitError, UsageError
from workers.pipeline.steps.backend_source import backend_sha, source_key

GIT_TIMEOUT_S = 600
# Not copied into a directory backend's run tree: version control and build output.
COPY_IGNORE = shutil.ignore_patterns(
    ".git", "build", "dist", "__pycache__", "*.egg-info", ".eggs", "*.so", ".pytest_cache"
)


@dataclass(frozen=True)
class Source:
    """What the registry says about a backend's source."""

    name: str
    location: str  # a directory, or a git URL
    ref: str | None = None
    subdir: str | None = None


@dataclass(frozen=True)
class RunTree:
    path: Path  # the backend dir inside the run's tree (its ootci.toml is here)
    sha: str  # what the run records as its backend sha
    key: str  # what the build dir is keyed by: the content, not the commit


def _git(args: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    try:
        proc = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT_S,
            env=env or git_environ(),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {args[0]}: {exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise GitError(f"git {' '.join(args[:2])}: {last}")
    return proc.stdout.strip()


@contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _has_commit(mirror: Path, sha: str) -> bool:
    try:
        _git(["--git-dir", str(mirror), "cat-file", "-e", f"{sha}^{{commit}}"])
    except GitError:
        return False
    return True


def fetch_commit(
    cache_dir: Path, url: str, ref: str | None, sha: str | None,
    credentials: Mapping[str, str] | None = None,
) -> tuple[Path, str]:
    """The mirror of ``url`` holding ``sha`` (or the commit ``ref`` names now), and that sha.
    A pinned sha already in the mirror needs no network; one that is not is fetched by
    itself, shallow. ``credentials`` (host -> token) reach git only through its
    environment (``service.sources.git_environ``)."""
    mirror = mirror_dir(cache_dir, url)
    env = git_environ(credentials)
    with _locked(mirror_lock(mirror)):
        if not (mirror / "HEAD").exists():
            mirror.mkdir(parents=True, exist_ok=True)
            _git(["init", "--quiet", "--bare", str(mirror)])
        stamp(mirror)
        if sha is not None and _has_commit(mirror, sha):
            return mirror, sha
        if sha is not None:
            try:
                _git(["--git-dir", str(mirror), "fetch", "--quiet", "--depth=1", url, sha], env=env)
            except GitError:
                # Servers that refuse a want by sha: the branches carry it (a pushed commit).
                _git(["--git-dir", str(mirror), "fetch", "--quiet", url,
                      "+refs/heads/*:refs/heads/*"], env=env)
            if not _has_commit(mirror, sha):
                raise GitError(f"{url} has no commit {sha}")
            return mirror, sha
        wanted = ref or "HEAD"
        _git(["--git-dir", str(mirror), "fetch", "--quiet", "--depth=1", url,
              f"+{wanted}:refs/ootci/wanted"], env=env)
        return mirror, _git(["--git-dir", str(mirror), "rev-parse", "refs/ootci/wanted^{commit}"])


def _git_key(mirror: Path, sha: str, subdir: str | None) -> str:
    try:
        tree = _git(["--git-dir", str(mirror), "rev-parse", f"{sha}:{subdir or ''}"])
    except GitError:
        # No such path in git's objects (missing, or through a symlink): keyed by the
        # commit, and the checkout says why it is not a backend dir (backend_dir).
        return sha[:24]
    return tree[:24]


def _checkout(mirror: Path, sha: str, dest: Path) -> None:
    _remove(dest, mirror)
    dest.parent.mkdir(parents=True, exist_ok=True)
    _git(["--git-dir", str(mirror), "worktree", "add", "--quiet", "--detach", "--force",
          str(dest), sha])


def _remove(dest: Path, mirror: Path | None) -> None:
    if dest.exists():
        shutil.rmtree(dest, ignore_errors=True)
    if mirror is not None:
        _git(["--git-dir", str(mirror), "worktree", "prune"])


@contextmanager
def _tree_in_use(lock_path: Path, make: Callable[[], None], remove: Callable[[], None]) -> Iterator[None]:
    """Hold the tree at a key while a run uses it. The first user makes it afresh; a run of
    the same content (another torch spec of the same backend) that starts meanwhile shares
    it rather than waiting for the first to finish; the last one out removes it."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    ready = lock_path.with_suffix(".ready")
    with lock_path.open("a") as lock:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                # In use (or being made, or being removed): join once it is made.
                fcntl.flock(lock, fcntl.LOCK_SH)
                if ready.exists():
                    break
                fcntl.flock(lock, fcntl.LOCK_UN)  # the last user removed it: try again
                continue
            ready.unlink(missing_ok=True)
            make()
            ready.touch()
            # Shared while in use: a later run of the key joins, nobody remakes it under us.
            fcntl.flock(lock, fcntl.LOCK_SH)
            break
        try:
            yield
        finally:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pass  # still in use by another run: the last one out removes the tree
            else:
                ready.unlink(missing_ok=True)
                remove()


@contextmanager
def run_tree(
    cache_dir: Path, source: Source, *, pinned_sha: str | None = None,
    credentials: Mapping[str, str] | None = None,
) -> Iterator[RunTree]:
    """A fresh tree of ``source`` for one run (at ``pinned_sha`` for a git source, when the
    run names one), removed when the run is done with it."""
    trees = source_trees_dir(cache_dir, source.name)
    stop = pytest_config_stop(cache_dir)
    if not stop.is_file():
        stop.parent.mkdir(parents=True, exist_ok=True)
        stop.write_text("# ootci: no pytest config above a run tree applies (cache/layout.py)\n"
                        "[pytest]\n")
    if is_git_url(source.location):
        mirror, sha = fetch_commit(cache_dir, source.location, source.ref, pinned_sha, credentials)
        key = _git_key(mirror, sha, source.subdir)
        dest = trees / key

        def checkout() -> None:
            with _locked(mirror_lock(mirror)):
                _checkout(mirror, sha, dest)

        def remove_worktree() -> None:
            with _locked(mirror_lock(mirror)):
                _remove(dest, mirror)

        with _tree_in_use(trees / f"{key}.lock", checkout, remove_worktree):
            yield RunTree(backend_dir(dest, source.subdir, sha), sha, key)
        return
    registered = Path(source.location)
    if not registered.is_dir():
        raise UsageError(f"backend dir {registered} does not exist")
    sha, key = backend_sha(registered), source_key(registered)
    dest = trees / key

    def copy() -> None:
        _remove(dest, None)
        shutil.copytree(registered, dest, symlinks=True, ignore=COPY_IGNORE)
        _inline_links_out_of(registered, dest)

    with _tree_in_use(trees / f"{key}.lock", copy, lambda: _remove(dest, None)):
        yield RunTree(dest, sha, key)


def backend_dir(tree: Path, subdir: str | None, sha: str) -> Path:
    """The backend's dir ``subdir`` of the checked-out ``tree``, a real directory inside it.
    Judged on the run's own checkout, not at registration: a later commit can make a path
    component a symlink, and a build in a linked dir would run in place anywhere on the
    worker (issue #33)."""
    if not subdir:
        return tree
    problem = subdir_problem(subdir)
    if problem is not None:
        raise UsageError(problem)
    path = tree
    for part in PurePosixPath(subdir).parts:
        path = path / part
        if path.is_symlink():
            raise UsageError(
                f"--subdir {subdir!r}: {path.relative_to(tree)} is a symlink (to "
                f"{os.readlink(path)}) at {sha[:12]}: a backend's dir must be a real "
                "directory in its repository"
            )
        if not path.is_dir():
            raise UsageError(f"--subdir {subdir!r}: no directory {path.relative_to(tree)} at {sha[:12]}")
    if not path.resolve().is_relative_to(tree.resolve()):
        raise UsageError(f"--subdir {subdir!r} resolves outside the repository's tree")
    return path


def _inline_links_out_of(registered: Path, copy: Path) -> None:
    """A link in the copy that points out of the backend's tree (a shared build script one
    level up, say) becomes a copy of what it points to: as a link it would dangle in the
    copy, or reach back into the registered source, which a run never writes."""
    root = registered.resolve()
    for dirpath, dirnames, filenames in os.walk(copy):
        for name in [*dirnames, *filenames]:
            link = Path(dirpath) / name
            if not link.is_symlink():
                continue
            target = (registered / link.relative_to(copy)).resolve()
            if target == root or root in target.parents or not target.exists():
                continue
            link.unlink()
            if target.is_dir():
                shutil.copytree(target, link, symlinks=False, ignore=COPY_IGNORE)
            else:
                shutil.copy2(target, link)
