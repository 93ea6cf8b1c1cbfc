"""Checking a backend's source before it is registered: a git remote and its ref, or a dir.

``git ls-remote`` answers without a clone, so ``ootci backend add`` (and the API) can refuse
a URL that does not exist or a ref it does not have before writing anything; the write
itself is ``service/commands/backends.py:add_backend``. An I/O probe with no session, so it
sits outside the layers, like ``dispatch.py``: the CLI, the API and the workers (which
fetch with ``git_environ``) use it, and it uses no database (a contract in pyproject.toml).
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import urllib.parse
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

LS_REMOTE_TIMEOUT_S = 60
_SHA = re.compile(r"^[0-9a-f]{40}$")


class SourceUnreachable(ValueError):
    """The repository cannot be read, or it has no such ref."""


def is_git_url(source: str) -> bool:
    """A git URL (``https://``, ``ssh://``, ``file://``, ``git@host:path``), not a directory."""
    return "://" in source or re.match(r"^[\w.-]+@[\w.-]+:", source) is not None


def without_userinfo(url: str) -> str:
    """``url`` without the credentials ``credentials_problem`` finds, for anything shown."""
    if "://" not in url:
        return url
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc or credentials_problem(url) is None:
        return url  # none, or an ssh user name
    return _stripped(parts)


def _stripped(parts: urllib.parse.SplitResult) -> str:
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def credentials_problem(url: str) -> str | None:
    """Why ``url`` may not be registered: it carries a password or a token. A stored source
    is served by ``GET /api/backends`` and printed in logs, so a credential never rides in
    it; an ssh user name (``git@host:path``, ``ssh://git@host/...``) is not a credential."""
    if "://" not in url:
        return None
    parts = urllib.parse.urlsplit(url)
    if parts.password is not None or (parts.username and parts.scheme in {"http", "https"}):
        return (
            f"git URL {_stripped(parts)} carries credentials: register it without "
            "them and give the host's token in OOTCI_GIT_CREDENTIALS (JSON: host -> token) "
            "or OOTCI_GIT_CREDENTIALS_FILE"
        )
    return None


def git_environ(credentials: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a git child needs, and never a prompt: a missing credential is an error, not a
    hung worker waiting for a password. ``credentials`` (host -> token) become an
    ``Authorization`` header git sends to that host over https only, given through
    ``GIT_CONFIG_*`` variables: never on a command line (``ps`` shows those), never in a
    URL git could print or record."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/"),
        "LANG": "C",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "/bin/false",
        "SSH_ASKPASS": "/bin/false",
    }
    for i, (host, token) in enumerate(sorted((credentials or {}).items())):
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        env[f"GIT_CONFIG_KEY_{i}"] = f"http.https://{host}/.extraHeader"
        env[f"GIT_CONFIG_VALUE_{i}"] = f"Authorization: Basic {basic}"
        env["GIT_CONFIG_COUNT"] = str(i + 1)
    return env


def resolve_remote_ref(url: str, ref: str, credentials: Mapping[str, str] | None = None) -> str:
    """The commit ``ref`` (a branch, a tag or a full sha) names in the repository at ``url``."""
    try:
        proc = subprocess.run(
            ["git", "ls-remote", "--", url],
            capture_output=True, text=True, timeout=LS_REMOTE_TIMEOUT_S,
            env=git_environ(credentials),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SourceUnreachable(f"cannot read the git repository {url}: {exc}") from None
    if proc.returncode != 0:
        # git's first "fatal:" line is the reason; its last is often advice cut mid-sentence
        # ("and the repository exists.").
        lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
        reason = next((line for line in lines if line.startswith(("fatal:", "error:"))),
                      lines[0] if lines else "git ls-remote failed")
        raise SourceUnreachable(f"cannot read the git repository {url}: {reason}")
    refs: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        sha, _, name = line.partition("\t")
        refs[name] = sha
    for name in (ref, f"refs/heads/{ref}", f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}"):
        if name in refs:
            return refs[name]
    if _SHA.match(ref):
        return ref  # a commit: the workers fetch it by sha
    raise SourceUnreachable(f"{url} has no branch or tag {ref!r}")


def subdir_problem(subdir: str) -> str | None:
    """Why ``subdir`` cannot name a backend's dir inside its repository, from its text: it
    must stay inside the tree. Symlinks are judged where there is a tree, after checkout
    (``workers/pipeline/steps/source_tree.py``)."""
    path = PurePosixPath(subdir)
    if not subdir or "\x00" in subdir or "\\" in subdir:
        return f"--subdir {subdir!r} is not a relative path inside the repository"
    if path.is_absolute() or any(part in {"..", ".git"} for part in path.parts):
        return (f"--subdir {subdir!r} must be a relative path inside the repository "
                "(no leading /, no .., not .git)")
    return None


def check_source(
    location: str, ref: str | None, credentials: Mapping[str, str] | None = None
) -> str | None:
    """Refuse a source a worker could not build before anything is registered: a git URL
    must carry no credentials, answer and have ``ref`` (its commit is returned), a
    directory must hold a recipe."""
    if is_git_url(location):
        problem = credentials_problem(location)
        if problem is not None:
            raise SourceUnreachable(problem)
        return resolve_remote_ref(location, ref or "HEAD", credentials)
    if ref is not None:
        raise SourceUnreachable("--ref is for a git source; a directory is built as it is")
    path = Path(location)
    if not (path / "ootci.toml").is_file():
        raise SourceUnreachable(f"{location} is not a backend dir (no ootci.toml)")
    return None
