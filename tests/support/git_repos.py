"""Real git repositories for the backend registry's tests: a bare "remote" (a file:// URL
stands in for GitHub) and a working clone to commit and push from."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

_IDENTITY = ["-c", "user.name=ootci tests", "-c", "user.email=tests@ootci.invalid",
             "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *_IDENTITY, *args], cwd=cwd, check=True, capture_output=True, text=True,
        timeout=60,
    ).stdout.strip()


@dataclass
class Remote:
    bare: Path
    work: Path

    @property
    def url(self) -> str:
        return self.bare.as_uri()

    def push(self, message: str) -> str:
        """Commit everything in the working clone, push it to main; the new sha."""
        git(self.work, "add", "-A")
        git(self.work, "commit", "--quiet", "--allow-empty", "-m", message)
        git(self.work, "push", "--quiet", "origin", "HEAD:refs/heads/main")
        return git(self.work, "rev-parse", "HEAD")


def make_remote(root: Path) -> Remote:
    """An empty bare repository and a clone of it at ``root/work``."""
    root.mkdir(parents=True, exist_ok=True)
    bare = root / "remote.git"
    git(root, "init", "--quiet", "--bare", str(bare))
    work = root / "work"
    git(root, "clone", "--quiet", bare.as_uri(), str(work))
    git(work, "checkout", "--quiet", "-b", "main")
    return Remote(bare, work)


def push_payload(remote: Remote, after: str, *, before: str = "0" * 40,
                 full_name: str = "acme/torch-acme") -> dict[str, object]:
    """GitHub's ``push`` event for a push to main of ``remote``: its URLs are the file://
    URL the backend was registered from, as a self-hosted forge's would be."""
    return {
        "ref": "refs/heads/main",
        "before": before,
        "after": after,
        "created": before == "0" * 40,
        "deleted": False,
        "forced": False,
        "compare": f"{remote.url}/compare/{before[:12]}...{after[:12]}",
        "repository": {
            "full_name": full_name,
            "name": full_name.split("/")[1],
            "clone_url": remote.url,
            "html_url": remote.url,
            "default_branch": "main",
        },
        "pusher": {"name": "alice"},
    }
