"""The backend registry through `ootci`: a backend registered from a git URL (a local bare
repository) is built at the exact commit its ref names; bad sources are refused before
anything is written; a run never writes into the registered tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from service.db import make_engine
from service.models import Backend, BackendChange, Run
from tests.support.git_repos import Remote, make_remote
from tests.support.paths import REPO_ROOT
from tests.support.pyonly import write_pyonly_backend

SUITE = "def test_ok():\n    assert 1 + 1 == 2\n"
# A build that writes into its source dir, as setuptools does with build/ and egg-info.
WRITING_RECIPE = """\
[backend]
name = "scribbler"
[build]
command = ["{python}", "-c", "open('written-by-build.txt', 'w').write('x'); print('wrote')"]
[test]
command = ["{python}", "-m", "pytest", "tests", "-p", "no:cacheprovider", "--junitxml={junit}"]
"""


def ootci(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    environ.update({"OOTCI_HOME": str(home), "OOTCI_DEFAULT_TORCH": "installed",
                    "OOTCI_RERUN_FAILED_TESTS": "false", "COLUMNS": "200"})
    return subprocess.run([sys.executable, "-m", "service.cli", *args], cwd=REPO_ROOT,
                          env=environ, capture_output=True, text=True, timeout=600)


def rows(home: Path) -> tuple[list[Backend], list[Run], list[BackendChange]]:
    db = home / "ootci.db"
    if not db.exists():
        return [], [], []
    engine = make_engine(f"sqlite:///{db}")
    from sqlalchemy.orm import Session

    with Session(engine) as s:
        found = (list(s.scalars(select(Backend))), list(s.scalars(select(Run))),
                 list(s.scalars(select(BackendChange))))
    engine.dispose()
    return found


@pytest.fixture
def remote(tmp_path: Path) -> Remote:
    r = make_remote(tmp_path)
    write_pyonly_backend(r.work / "vendor", {"test_suite.py": SUITE})
    (r.work / "README").write_text("a vendor's monorepo: the backend is in vendor/\n")
    return r


def test_a_git_backend_runs_at_the_exact_commit_of_its_ref(remote: Remote, tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = remote.push("first")
    added = ootci(home, "backend", "add", "acme", "--git", remote.url, "--subdir", "vendor")
    assert added.returncode == 0, added.stderr
    assert first[:12] in added.stdout

    done = ootci(home, "run", "--backend", "acme", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = json.loads(done.stdout)
    assert run["state"] == "passed" and run["backend_sha"] == first

    (remote.work / "vendor" / "tests" / "test_second.py").write_text(SUITE)
    second = remote.push("second")
    done = ootci(home, "run", "--backend", "acme", "--json")
    (run,) = json.loads(done.stdout)
    assert run["backend_sha"] == second
    tests = ootci(home, "show", str(run["id"]), "--json")
    assert tests.returncode == 0, tests.stderr

    shown = json.loads(ootci(home, "backend", "show", "acme", "--json").stdout)
    assert shown["source"] == remote.url and shown["ref"] == "main"
    assert shown["subdir"] == "vendor" and shown["last_built_sha"] == second
    assert [c["change"] for c in shown["changes"]] == ["registered"]
    listed = json.loads(ootci(home, "backend", "list", "--json").stdout)
    assert [b["name"] for b in listed] == ["acme"]

    # The per-run worktrees are gone; the mirror stays for the next run.
    cache = home / "cache"
    assert not any((cache / "sources" / "acme").glob("*/"))
    assert len(list((cache / "git").glob("*.git"))) == 1

    removed = ootci(home, "backend", "remove", "acme")
    assert removed.returncode == 0, removed.stderr
    assert json.loads(ootci(home, "backend", "list", "--json").stdout) == []
    backends, runs, _ = rows(home)
    assert len(runs) == 2 and not backends[0].nightly  # its runs keep their history


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--git", "file:///nonexistent/repo.git"], "cannot read the git repository"),
        (["--ref", "no-such-branch"], "has no branch or tag 'no-such-branch'"),
        (["--path", "/nonexistent/backend"], "not a backend dir"),
    ],
)
def test_a_source_that_cannot_be_built_is_refused_with_one_line(
    remote: Remote, tmp_path: Path, args: list[str], expected: str
) -> None:
    remote.push("first")
    home = tmp_path / "home"
    source = [] if args[0] in ("--git", "--path") else ["--git", remote.url]
    proc = ootci(home, "backend", "add", "acme", *source, *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert expected in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert rows(home) == ([], [], [])


def test_a_cli_experiment_is_not_a_registered_backend(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tree = write_pyonly_backend(tmp_path / "pyonly", {"test_suite.py": SUITE})
    done = ootci(home, "run", "--backend", str(tree))
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(ootci(home, "backend", "list", "--json").stdout) == []
    assert ootci(home, "run", "--backend", "pyonly").returncode == 2  # not a registered name
    added = ootci(home, "backend", "add", "pyonly", "--path", str(tree))
    assert added.returncode == 0, added.stderr
    (backend,), _, changes = rows(home)
    assert backend.nightly
    assert [c.change for c in changes] == ["registered", "registered"]  # ran, then added


def test_a_build_that_writes_into_its_source_leaves_the_registered_tree_unchanged(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    tree = write_pyonly_backend(tmp_path / "scribbler", {"test_suite.py": SUITE})
    (tree / "ootci.toml").write_text(WRITING_RECIPE)
    before = sorted(str(p.relative_to(tree)) for p in tree.rglob("*"))
    done = ootci(home, "run", "--backend", str(tree), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = json.loads(done.stdout)
    assert run["state"] == "passed"
    assert sorted(str(p.relative_to(tree)) for p in tree.rglob("*")) == before
    assert not (tree / "written-by-build.txt").exists()
