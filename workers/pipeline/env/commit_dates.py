"""When an upstream commit was made, for a ``commit:<sha>`` spec: the nightlies dated from
then on are the only ones worth opening. Asked of GitHub only when a token is configured
(an unauthenticated client would be rate-limited within the hour); without an answer the
resolver falls back to the newest nightlies, bounded."""

from __future__ import annotations

import datetime as dt

from service.config import Settings
from service.github.errors import GitHubError
from workers.pipeline.logs.sink import LogSink


def commit_date(settings: Settings, sha: str, log: LogSink) -> dt.date | None:
    if not settings.github_token.get_secret_value():
        log.write(f"ootci: no OOTCI_GITHUB_TOKEN: the date of {sha} is unknown, "
                  "searching the newest nightlies\n")
        return None
    # Here, not at the top: PyGithub is a quarter of a second of every `ootci run`'s
    # start-up, and only a commit: spec with a token ever needs it.
    from service.github.client import GitHubClient

    try:
        date = GitHubClient.from_settings(settings).commit_date(sha)
    except GitHubError as exc:
        log.write(f"ootci: the date of {sha} is unknown ({exc}): searching the newest nightlies\n")
        return None
    if date is not None:
        log.write(f"ootci: {sha} was committed on {date.isoformat()}\n")
    return date
