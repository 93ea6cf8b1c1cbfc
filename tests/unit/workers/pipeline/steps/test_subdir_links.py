"""A backend's --subdir must be a real directory inside its repository, judged on the run's
own checkout: a symlinked subdir (or a symlinked component of it) would have the worker
build whatever directory of the host it points to, in place."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine

from service.commands.backends import add_backend
from service.commands.runs import create_run
from service.config import Settings
from service.db import session_scope
from service.models import Run
from tests.support.cli import ootci
from tests.support.git_repos import Remote, make_remote
from tests.support.pyonly import write_pyonly_backend
from workers.pipeline.errors import UsageError
from workers.pipeline.execute import execute_run
from workers.pipeline.steps.source_tree import Source, run_tree


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A backend dir of the host, outside any repository: what a link would build."""
    return write_pyonly_backend(tmp_path / "host-dir", {"test_x.py": "def test_x():\n    pass\n"})


def _remote_with(tmp_path: Path, link: str, target: str) -> tuple[Remote, str]:
    remote = make_remote(tmp_path / "repo")
    write_pyonly_backend(remote.work / "vendor")
    (remote.work / link).parent.mkdir(parents=True, exist_ok=True)
    (remote.work / link).symlink_to(target)
    return remote, remote.push("a link")


@pytest.mark.parametrize(
    ("link", "subdir"),
    [("vendor-link", "vendor-link"), ("deep", "deep/sub")],
    ids=["the subdir", "a component of it"],
)
def test_a_symlink_out_of_the_tree_is_refused_before_anything_runs_in_it(
    tmp_path: Path, outside: Path, link: str, subdir: str
) -> None:
    target = outside if link == "vendor-link" else outside.parent
    if link == "deep":
        (outside.parent / "sub").symlink_to(outside)  # deep/sub -> the host's backend dir
    remote, _ = _remote_with(tmp_path, link, str(target))
    before = sorted(p.name for p in outside.iterdir())
    with pytest.raises(UsageError, match=r"is a symlink \(to .*\) at [0-9a-f]{12}: a backend's dir must be a real"), \
            run_tree(tmp_path / "cache", Source("acme", remote.url, "main", subdir)):
        pass
    assert sorted(p.name for p in outside.iterdir()) == before


def test_a_symlink_inside_the_tree_is_refused_too(tmp_path: Path) -> None:
    remote, _ = _remote_with(tmp_path, "alias", "vendor")
    with pytest.raises(UsageError, match="alias is a symlink"), \
            run_tree(tmp_path / "cache", Source("acme", remote.url, "main", "alias")):
        pass
    with run_tree(tmp_path / "cache", Source("acme", remote.url, "main", "vendor")) as tree:
        assert (tree.path / "ootci.toml").is_file()


@pytest.mark.parametrize("subdir", ["../outside", "/etc", "vendor/../../x", ".git"])
def test_a_subdir_that_leaves_the_tree_is_a_usage_error(tmp_path: Path, subdir: str) -> None:
    remote, _ = _remote_with(tmp_path, "alias", "vendor")
    with pytest.raises(UsageError, match="must be a relative path inside the repository"), \
            run_tree(tmp_path / "cache", Source("acme", remote.url, "main", subdir)):
        pass


def test_the_worker_ends_such_a_run_refused_as_a_usage_error(
    tmp_path: Path, engine: Engine, outside: Path
) -> None:
    remote, sha = _remote_with(tmp_path, "vendor-link", str(outside))
    with session_scope(engine) as s:
        backend = add_backend(s, "acme", remote.url, changed_by="test", ref="main",
                              subdir="vendor-link")
        run_id = create_run(s, backend, "installed", trigger="nightly", backend_sha=sha).id
    execute_run(engine, Settings(home=tmp_path / "home", database_url=str(engine.url)),
                run_id, "w-test")
    with session_scope(engine) as s:
        run = s.get_one(Run, run_id)
        assert run.state == "errored" and run.error_kind == "usage", (run.state, run.error)
        assert run.error is not None and "vendor-link is a symlink" in run.error


def test_the_cli_refuses_a_subdir_out_of_the_tree_in_one_line_with_exit_2(tmp_path: Path) -> None:
    done = ootci(tmp_path, "backend", "add", "acme", "--git", "https://example.org/a.git",
                 "--subdir", "../../etc")
    assert done.returncode == 2
    lines = [line for line in done.stdout.splitlines() + done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "must be a relative path" in lines[0], lines
