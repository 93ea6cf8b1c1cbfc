"""Build dirs are keyed by the backend's own tree: commits elsewhere reuse the build."""

from __future__ import annotations

import subprocess
from pathlib import Path

from workers.pipeline.steps.backend_source import backend_sha, source_key


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_source_key_follows_the_backend_tree_not_the_repository(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.email", "t@example.invalid")
    git(tmp_path, "config", "user.name", "t")
    backend = tmp_path / "backend"
    backend.mkdir()
    (backend / "a.cpp").write_text("int a;\n")
    (tmp_path / "README").write_text("x\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "one")
    key, sha = source_key(backend), backend_sha(backend)

    (tmp_path / "README").write_text("y\n")
    git(tmp_path, "commit", "-qam", "elsewhere")
    assert source_key(backend) == key  # same backend source: same build dir
    assert backend_sha(backend) != sha  # but the run records the new commit

    (backend / "a.cpp").write_text("int b;\n")
    dirty = source_key(backend)
    assert dirty != key and "dirty" in backend_sha(backend)
    git(tmp_path, "commit", "-qam", "change the backend")
    assert source_key(backend) not in (key, dirty)
