"""What a GitHub call can end in, as the rest of ootci sees it (no PyGithub types leak out)."""

from __future__ import annotations


class GitHubError(RuntimeError):
    """A GitHub call that did not happen. The message is one line, fit for a log or the CLI."""


class GitHubConfigError(GitHubError):
    """GitHub refused the credentials (401, or a 403 that is not a rate limit): retrying
    cannot help until someone fixes OOTCI_GITHUB_TOKEN or its permissions."""


class GitHubUnavailable(GitHubError):
    """GitHub did not do it this time (outage, rate limit longer than we wait, an answer we
    cannot act on): the caller keeps the work and tries again later."""
