"""Identify the exact backend source a run builds: its git sha (+ a hash of local edits)."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path


def _git(source: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", "-C", str(source), *args], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def backend_sha(source: Path) -> str:
    """The commit of ``source``; ``<sha>-dirty-<hash>`` when it has uncommitted edits, so a
    build dir keyed by it is never reused for different code. Outside git: a content hash."""
    head = _git(source, "rev-parse", "HEAD")
    if head is None:
        return "nogit-" + _tree_hash(source)
    sha = head.strip()
    diff = _git(source, "diff", "HEAD", "--", ".")
    untracked = _git(source, "ls-files", "--others", "--exclude-standard", "--", ".")
    if diff or untracked:
        digest = hashlib.sha256((diff or "").encode() + (untracked or "").encode()).hexdigest()
        return f"{sha[:12]}-dirty-{digest[:8]}"
    return sha


def source_key(source: Path) -> str:
    """What the build dir is keyed by: the git tree of ``source`` itself (plus local edits),
    not the repository's commit, so commits elsewhere in the repository reuse the build."""
    tree = _git(source, "rev-parse", "HEAD:./")
    if tree is None:
        return "nogit-" + _tree_hash(source)
    sha = backend_sha(source)
    dirty = sha.split("-dirty-", 1)[1] if "-dirty-" in sha else ""
    return tree.strip()[:24] + (f"-{dirty}" if dirty else "")


def _tree_hash(source: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(source.rglob("*")):
        if path.is_file() and "build" not in path.parts and path.suffix not in {".so", ".pyc"}:
            digest.update(str(path.relative_to(source)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
