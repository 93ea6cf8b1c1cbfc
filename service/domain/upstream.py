"""Upstream commits as ootci sees them: the shared shape between the GitHub adapter and
culprit ranking.

The adapter (`service/github/client.py`) turns GitHub's compare and commit responses
into these; `service/domain/culprit.py` scores them. Nothing here does I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# pytorchmergebot lands a PR as one commit titled "<title> (#NNNNN)" whose body ends with
# "Pull Request resolved: https://github.com/pytorch/pytorch/pull/NNNNN".
_TRAILER = re.compile(r"^Pull Request resolved:\s*\S*/pull/(\d+)\s*$", re.MULTILINE)
_TITLE_SUFFIX = re.compile(r"\(#(\d+)\)\s*$")


@dataclass(frozen=True)
class FileChange:
    """One file of a commit, as GitHub's commit API lists it."""

    filename: str
    # GitHub's words: added, removed, modified, renamed, copied, changed, unchanged.
    status: str
    previous_filename: str | None = None
    # The unified-diff hunks; GitHub omits it for binary or very large files.
    patch: str | None = None
    additions: int = 0
    deletions: int = 0


@dataclass(frozen=True)
class UpstreamCommit:
    sha: str
    message: str
    files: tuple[FileChange, ...] = field(default_factory=tuple)
    # The PR the commit landed from, when known (message first, else the commit->pulls API).
    pr: int | None = None
    author: str | None = None
    # ISO 8601, as GitHub gives it.
    committed_at: str | None = None

    @property
    def title(self) -> str:
        return self.message.split("\n", 1)[0].strip()


def pr_number_from_message(message: str) -> int | None:
    """The PR a merged upstream commit came from, read from its message alone.

    The "Pull Request resolved:" trailer wins over the title suffix: a revert's title
    quotes the reverted PR's title, suffix included.
    """
    trailer = _TRAILER.findall(message)
    if trailer:
        return int(trailer[-1])
    title = message.split("\n", 1)[0]
    suffix = _TITLE_SUFFIX.search(title)
    return int(suffix.group(1)) if suffix else None
