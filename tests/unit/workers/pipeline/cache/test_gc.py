"""The cache GC removes torch envs, build dirs, git mirrors and run dirs nobody used for a
while, keeps the most recent ones whatever their age, never touches an env being
provisioned or a mirror being fetched into, and takes the build dirs of the envs it
removes with it."""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.git_repos import make_remote
from tests.support.paths import REPO_ROOT
from workers.pipeline.cache.gc import collect_garbage
from workers.pipeline.cache.layout import STAMP, build_dir, mirror_lock
from workers.pipeline.steps.source_tree import fetch_commit

ROOT = REPO_ROOT
DAY = 86400.0
NOW = time.time()
WEEK = dt.timedelta(days=7)


def backdate(entry: Path, age_days: float) -> None:
    when = NOW - age_days * DAY
    os.utime(entry / STAMP, (when, when))


def make_entry(path: Path, age_days: float, payload: int = 1000) -> Path:
    path.mkdir(parents=True)
    (path / "payload.bin").write_bytes(b"x" * payload)
    (path / STAMP).touch()
    backdate(path, age_days)
    return path


def make_env(cache: Path, key: str, age_days: float) -> Path:
    env = make_entry(cache / "envs" / key, age_days)
    (cache / "envs" / f"{key}.lock").touch()
    return env


def make_build(cache: Path, env_key: str, tree: str, age_days: float) -> Path:
    return make_entry(build_dir(cache, "openreg", env_key, tree), age_days)


def key(char: str) -> str:
    return char * 24


def test_removes_old_envs_their_build_dirs_and_old_build_dirs(tmp_path: Path) -> None:
    new, mid, old, older = (make_env(tmp_path, key(c), age) for c, age in zip("abcd", (0, 3, 10, 20), strict=True))
    fresh_build_of_old_env = make_build(tmp_path, key("c"), "t1", 0)
    fresh_build = make_build(tmp_path, key("a"), "t2", 0)
    stale_build = make_build(tmp_path, key("a"), "t1", 30)

    report = collect_garbage(tmp_path, max_age=WEEK, keep=1, now=NOW)

    assert {r.path for r in report.removed} == {old, older, fresh_build_of_old_env, stale_build}
    assert not old.exists() and not older.exists() and not stale_build.exists()
    assert new.exists() and mid.exists() and fresh_build.exists()
    assert report.freed_bytes >= 4 * 1000
    assert report.kept == 3
    # Lock files stay: another process may hold the path open to wait on it.
    assert (tmp_path / "envs" / f"{key('c')}.lock").exists()


def test_keeps_the_most_recent_whatever_their_age(tmp_path: Path) -> None:
    envs = [make_env(tmp_path, key(c), age) for c, age in zip("abc", (30, 40, 50), strict=True)]
    report = collect_garbage(tmp_path, max_age=WEEK, keep=2, now=NOW)
    assert [r.path for r in report.removed] == [envs[2]]
    assert envs[0].exists() and envs[1].exists()


def test_an_env_being_provisioned_is_skipped(tmp_path: Path) -> None:
    env = make_env(tmp_path, key("a"), 30)
    with (tmp_path / "envs" / f"{key('a')}.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        report = collect_garbage(tmp_path, max_age=WEEK, keep=0, now=NOW)
    assert report.removed == [] and report.skipped_busy == [env]
    assert env.exists()


def test_a_fetch_stamps_its_mirror_and_an_old_mirror_goes_unless_a_fetch_holds_it(tmp_path: Path) -> None:
    remote = make_remote(tmp_path / "remote")
    (remote.work / "README").write_text("x\n")
    sha = remote.push("first")
    cache = tmp_path / "cache"
    mirror, fetched = fetch_commit(cache, remote.url, "main", None)
    assert fetched == sha and NOW - (mirror / STAMP).stat().st_mtime < 60

    backdate(mirror, 30)
    with mirror_lock(mirror).open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        busy = collect_garbage(cache, max_age=WEEK, keep=0, now=NOW)
    assert busy.removed == [] and busy.skipped_busy == [mirror] and mirror.exists()

    report = collect_garbage(cache, max_age=WEEK, keep=0, now=NOW)
    assert [(r.path, r.kind) for r in report.removed] == [(mirror, "mirror")]
    assert not mirror.exists()
    # The next run fetches afresh.
    assert fetch_commit(cache, remote.url, None, sha) == (mirror, sha)


def test_old_run_dirs_go_read_only_parts_and_all_the_recent_ones_stay(tmp_path: Path) -> None:
    work = tmp_path / "work"
    old, recent, newest = (make_entry(work / "runs" / str(n), age) for n, age in ((1, 30), (2, 3), (3, 0)))
    # A suite may leave a dir without its write bit; a non-root worker must still remove it.
    frozen = old / "tmp" / "frozen"
    frozen.mkdir(parents=True)
    (frozen / "kernel.so").write_bytes(b"\0" * 4096)
    frozen.chmod(0o555)

    report = collect_garbage(tmp_path / "cache", work_dir=work, max_age=WEEK, keep=1, now=NOW)

    assert [(r.path, r.kind) for r in report.removed] == [(old, "run")]
    assert report.freed_bytes >= 4096 + 1000
    assert not old.exists() and recent.exists() and newest.exists()
    assert report.kept == 2


def test_unstamped_entries_count_from_their_mtime(tmp_path: Path) -> None:
    env = make_env(tmp_path, key("a"), 0)
    (env / STAMP).unlink()
    month_ago = NOW - 30 * DAY
    os.utime(env, (month_ago, month_ago))
    assert [r.path for r in collect_garbage(tmp_path, max_age=WEEK, keep=0, now=NOW).removed] == [env]


def test_dry_run_reports_without_removing(tmp_path: Path) -> None:
    env = make_env(tmp_path, key("a"), 30)
    report = collect_garbage(tmp_path, max_age=WEEK, keep=0, dry_run=True, now=NOW)
    assert [r.path for r in report.removed] == [env]
    assert env.exists()


def test_refuses_an_age_shorter_than_a_run(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least"):
        collect_garbage(tmp_path, max_age=dt.timedelta(hours=1), keep=0)


def test_empty_or_missing_cache_is_fine(tmp_path: Path) -> None:
    report = collect_garbage(tmp_path / "nowhere", max_age=WEEK, keep=0)
    assert report.removed == [] and report.kept == 0


def ootci_gc(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    environ.update({"OOTCI_HOME": str(tmp_path / "home"), "OOTCI_CACHE_DIR": str(tmp_path / "cache")})
    return subprocess.run(
        [sys.executable, "-m", "service.cli", "gc", *args],
        cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120,
    )


def test_cli_dry_run_then_remove(tmp_path: Path) -> None:
    old = make_env(tmp_path / "cache", key("a"), 30)
    make_env(tmp_path / "cache", key("b"), 0)

    dry = ootci_gc(tmp_path, "--dry-run", "--keep", "0", "--json")
    assert dry.returncode == 0, dry.stderr
    listed = json.loads(dry.stdout)
    assert [r["path"] for r in listed["removed"]] == [str(old)] and listed["dry_run"]
    assert old.exists()

    done = ootci_gc(tmp_path, "--keep", "0")
    assert done.returncode == 0, done.stderr
    assert "removed 1 entries" in done.stdout
    assert not old.exists()


def test_cli_rejects_a_too_short_age(tmp_path: Path) -> None:
    result = ootci_gc(tmp_path, "--max-age-days", "0")
    assert result.returncode == 2
    assert "at least" in result.stderr
