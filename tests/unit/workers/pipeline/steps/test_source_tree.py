"""The run's own tree: a copy of a directory backend or a worktree of a git mirror at the
run's exact commit, shared by runs of the same content that overlap, gone after the last."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.git_repos import make_remote
from tests.support.pyonly import write_pyonly_backend
from workers.pipeline.errors import GitError
from workers.pipeline.steps.source_tree import Source, run_tree


def test_a_directory_backend_is_copied_without_git_and_build_output(tmp_path: Path) -> None:
    tree = write_pyonly_backend(tmp_path / "acme", {"test_ok.py": "def test_ok():\n    pass\n"})
    (tree / "build").mkdir()
    (tree / "build" / "stale.o").write_text("old")
    (tree / ".git").mkdir()
    cache = tmp_path / "cache"
    with run_tree(cache, Source("acme", str(tree))) as run:
        assert run.path != tree and (run.path / "ootci.toml").is_file()
        assert not (run.path / "build").exists() and not (run.path / ".git").exists()
        (run.path / "written-by-build.txt").write_text("x")
        # A run of the same content that starts meanwhile shares the tree.
        with run_tree(cache, Source("acme", str(tree))) as same:
            assert same.path == run.path and (same.path / "written-by-build.txt").exists()
        assert run.path.is_dir()  # the first run still uses it
    assert not run.path.exists()
    assert not (tree / "written-by-build.txt").exists()
    # The next run starts from a fresh copy.
    with run_tree(cache, Source("acme", str(tree))) as again:
        assert not (again.path / "written-by-build.txt").exists()


def test_links_out_of_the_tree_are_copied_in_and_links_inside_stay_links(tmp_path: Path) -> None:
    (tmp_path / "shared_build.py").write_text("print('shared')\n")
    tree = write_pyonly_backend(tmp_path / "acme")
    (tree / "build.py").symlink_to("../shared_build.py")
    (tree / "recipe-alias.toml").symlink_to("ootci.toml")
    with run_tree(tmp_path / "cache", Source("acme", str(tree))) as run:
        copied = run.path / "build.py"
        assert not copied.is_symlink() and copied.read_text() == "print('shared')\n"
        copied.write_text("changed by a build\n")
        assert (run.path / "recipe-alias.toml").is_symlink()
    assert (tmp_path / "shared_build.py").read_text() == "print('shared')\n"


def test_a_git_backend_is_checked_out_at_the_runs_commit(tmp_path: Path) -> None:
    remote = make_remote(tmp_path / "repo")
    write_pyonly_backend(remote.work / "vendor")
    (remote.work / "vendor" / "VERSION").write_text("1\n")
    first = remote.push("one")
    (remote.work / "vendor" / "VERSION").write_text("2\n")
    second = remote.push("two")
    cache = tmp_path / "cache"
    source = Source("acme", remote.url, "main", "vendor")
    with run_tree(cache, source) as head:
        assert head.sha == second and (head.path / "VERSION").read_text() == "2\n"
    with run_tree(cache, source, pinned_sha=first) as pinned:
        assert pinned.sha == first and (pinned.path / "VERSION").read_text() == "1\n"
        assert pinned.key != head.key
    assert not pinned.path.exists()
    with pytest.raises(GitError, match="no commit|fetch"), run_tree(
        cache, source, pinned_sha="f" * 40
    ):
        pass
