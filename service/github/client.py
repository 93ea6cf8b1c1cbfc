"""ootci's GitHub adapter: the one module that imports PyGithub.

Reads the commits of an upstream regression range (with files, patch hunks and their PR)
and makes the writes ootci reports with: labels and one marker-found comment on an
upstream PR, commit statuses, and a vendor's pin-bump pull request kept up to date.

Retries are ours, not PyGithub's (``retry=None``): each public call is retried as a whole,
which is safe because each is idempotent by construction (an upsert looks before it
writes), so a write whose answer was lost is found, not repeated, on the next try. Waits
go through an injectable ``sleep`` and ``clock``; the policy is in :mod:`service.github.retry`.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from datetime import UTC
from functools import partial
from typing import TYPE_CHECKING, Literal, TypeVar

import requests
from github import Auth, Github, GithubException

from service.domain.upstream import FileChange, UpstreamCommit, pr_number_from_message
from service.github.errors import GitHubConfigError, GitHubUnavailable
from service.github.retry import Backoff, Failure, GiveUp, decide

if TYPE_CHECKING:
    from github.Commit import Commit
    from github.ContentFile import ContentFile
    from github.File import File
    from github.GitRef import GitRef
    from github.Repository import Repository

    from service.config import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")
StatusState = Literal["error", "failure", "pending", "success"]

# GitHub's "Best practices for using the REST API": make write requests at least one
# second apart. Reads are made one at a time, which is the other half of that advice.
WRITE_INTERVAL_S = 1.0
# GitHub answers a longer status description with 422 "description is too long
# (maximum is 140 characters)".
_STATUS_DESCRIPTION_MAX = 140


class GitHubClient:
    def __init__(
        self,
        api_url: str,
        token: str,
        upstream_repo: str = "pytorch/pytorch",
        *,
        timeout_s: float = 15.0,
        backoff: Backoff | None = None,
        page_size: int = 100,
        write_interval_s: float = WRITE_INTERVAL_S,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.upstream_repo = upstream_repo
        self.has_token = bool(token)
        self._backoff = backoff or Backoff()
        self._sleep = sleep
        self._clock = clock
        self._github = Github(
            base_url=self.api_url,
            auth=Auth.Token(token) if token else None,
            timeout=max(int(timeout_s), 1),
            per_page=page_size,
            retry=None,
            seconds_between_requests=None,
            seconds_between_writes=write_interval_s or None,
            # Objects are addressed by URL without a GET first; the first real request
            # tells us whether they exist.
            lazy=True,
        )

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        write_interval_s: float = WRITE_INTERVAL_S,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        max_retries: int | None = None,
    ) -> GitHubClient:
        """``max_retries`` overrides the setting (0: one try, for a caller someone waits on)."""
        return cls(
            settings.github_api_url,
            settings.github_token.get_secret_value(),
            settings.upstream_repo,
            timeout_s=settings.github_timeout_s,
            backoff=Backoff(
                max_retries=settings.github_max_retries if max_retries is None else max_retries
            ),
            write_interval_s=write_interval_s,
            sleep=sleep,
            clock=clock,
        )

    def __repr__(self) -> str:  # never the token
        return f"GitHubClient({self.api_url!r}, upstream={self.upstream_repo!r}, token={'set' if self.has_token else 'none'})"

    # -- reading the regression range --------------------------------------------------------
    def compare(self, base: str, head: str) -> list[UpstreamCommit]:
        """Every commit of ``base...head``, oldest first, with its files, patches and PR."""
        repo = self._repo(self.upstream_repo)
        listed = self._call(
            self.upstream_repo, f"compare {base[:12]}...{head[:12]}",
            lambda: list(repo.compare(base, head).commits),
        )
        return [
            self._call(self.upstream_repo, f"read commit {entry.sha[:12]}", partial(self._upstream_commit, entry))
            for entry in listed
        ]

    def _upstream_commit(self, listed: Commit) -> UpstreamCommit:
        # The compare entry has the message; its files come from the commit endpoint,
        # paged past 300 files, which iterating ``files`` follows.
        files = tuple(_file_change(f) for f in listed.files)
        git = listed.commit
        message = git.message
        pr = pr_number_from_message(message)
        if pr is None:
            pr = self._pr_of(listed)
        committed = git.committer.date if git.committer else None
        return UpstreamCommit(
            sha=listed.sha,
            message=message,
            files=files,
            pr=pr,
            author=listed.author.login if listed.author else (git.author.name if git.author else None),
            committed_at=committed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if committed else None,
        )

    @staticmethod
    def _pr_of(listed: Commit) -> int | None:
        """The PR GitHub associates with the commit: the one that merged it, if listed."""
        pulls = list(listed.get_pulls())
        for pull in pulls:
            if pull.merge_commit_sha == listed.sha:
                return pull.number
        merged = [p for p in pulls if p.merged_at is not None]
        chosen = merged or pulls
        return chosen[0].number if chosen else None

    def commit_date(self, sha: str) -> dt.date | None:
        """The day (UTC) an upstream commit was committed: where a ``commit:`` spec's search
        for the nightly built from it starts. None when GitHub has no date for it."""
        repo = self.upstream_repo

        def read() -> dt.date | None:
            _, data = self._github.requester.requestJsonAndCheck("GET", f"/repos/{repo}/commits/{sha}")
            committed = ((data or {}).get("commit") or {}).get("committer") or {}
            text = committed.get("date")
            if not isinstance(text, str):
                return None
            return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).date()

        return self._call(repo, f"read commit {sha[:12]}", read)

    # -- undoing a suspect (culprit verification) ---------------------------------------------
    def commit(self, sha: str) -> UpstreamCommit:
        """One upstream commit with its files and patches (the commit API)."""
        repo = self._repo(self.upstream_repo)
        return self._call(self.upstream_repo, f"read commit {sha[:12]}",
                          lambda: self._upstream_commit(repo.get_commit(sha)))

    def file_at(self, path: str, ref: str) -> bytes | None:
        """An upstream file as it was at ``ref`` (the contents API); None when it did not
        exist there (404)."""
        repo = self._repo(self.upstream_repo)

        def read() -> bytes | None:
            found = _file(repo, path, ref)
            return None if found is None else found.decoded_content

        return self._call(self.upstream_repo, f"read {path} at {ref[:12]}", read)

    # -- reporting on an upstream PR ---------------------------------------------------------
    def add_label(self, pr: int, name: str, repo: str | None = None) -> None:
        full_name = repo or self.upstream_repo
        issue = self._repo(full_name).get_issue(pr)
        self._call(full_name, f"label #{pr}", lambda: issue.add_to_labels(name))

    def remove_label(self, pr: int, name: str, repo: str | None = None) -> bool:
        """Removes the label; False when the PR did not carry it (already the wanted state)."""
        full_name = repo or self.upstream_repo
        issue = self._repo(full_name).get_issue(pr)

        def remove() -> bool:
            try:
                issue.remove_from_labels(name)
            except GithubException as exc:
                if exc.status == 404 and _message(exc) == "Label does not exist":
                    return False
                raise
            return True

        return self._call(full_name, f"unlabel #{pr}", remove)

    def upsert_comment(self, pr: int, marker: str, body: str, repo: str | None = None) -> tuple[int, str, bool]:
        """The one comment on ``pr`` carrying ``marker``: edited if found on any page,
        else created. Returns (comment id, its html_url, whether it was created)."""
        full_name = repo or self.upstream_repo
        text = body if marker in body else f"{body}\n\n{marker}"
        issue = self._repo(full_name).get_issue(pr)

        def upsert() -> tuple[int, str, bool]:
            for comment in issue.get_comments():
                if marker in (comment.body or ""):
                    if comment.body != text:
                        comment.edit(text)
                    return comment.id, comment.html_url, False
            created = issue.create_comment(text)
            return created.id, created.html_url, True

        return self._call(full_name, f"comment on #{pr}", upsert)

    def set_status(
        self,
        sha: str,
        state: StatusState,
        context: str,
        description: str,
        target_url: str | None = None,
        repo: str | None = None,
    ) -> int:
        """A commit status on ``sha``; GitHub keeps the latest per context. Returns its id."""
        full_name = repo or self.upstream_repo
        payload: dict[str, str] = {
            "state": state,
            "context": context,
            "description": _clip(description, _STATUS_DESCRIPTION_MAX),
        }
        if target_url:
            payload["target_url"] = target_url

        def post() -> int:
            # PyGithub's Commit.create_status would GET the whole commit first (files and
            # all) just to learn the sha we already have; its requester posts directly.
            _, data = self._github.requester.requestJsonAndCheck(
                "POST", f"/repos/{full_name}/statuses/{sha}", input=payload
            )
            return int(data["id"])

        return self._call(full_name, f"set status {context} on {sha[:12]}", post)

    # -- the weekly pin-bump pull request ----------------------------------------------------
    def upsert_pull_request(
        self, repo: str, branch: str, base: str, path: str, content: str, title: str, body: str
    ) -> tuple[int, str, bool] | None:
        """One branch and one open PR proposing ``content`` for ``path``, updated in place.

        When the file differs, the branch is reset onto ``base``'s head and the file is
        committed on it: the PR is always one commit on today's base, as a bump bot's is.
        Returns (PR number, its html_url, whether the PR was created now), or None when
        ``base`` already holds ``content`` (the pin caught up): then there is nothing to
        propose, and an open PR from ``branch`` is closed."""
        gh_repo = self._repo(repo)
        owner = repo.split("/", 1)[0]

        def upsert() -> tuple[int, str, bool] | None:
            if _file_text(gh_repo, path, base) == content:
                _close_pulls(gh_repo, owner, branch)
                return None
            base_sha = gh_repo.get_git_ref(f"heads/{base}").object.sha
            branch_ref = _branch_ref(gh_repo, branch)
            if branch_ref is None:
                branch_ref = gh_repo.create_git_ref(f"refs/heads/{branch}", base_sha)
            if _file_text(gh_repo, path, branch) != content:
                if branch_ref.object.sha != base_sha:
                    branch_ref.edit(base_sha, force=True)
                on_base = _file_sha(gh_repo, path, base)
                if on_base is None:
                    gh_repo.create_file(path, title, content, branch=branch)
                else:
                    gh_repo.update_file(path, title, content, on_base, branch=branch)
            open_prs = list(gh_repo.get_pulls(state="open", head=f"{owner}:{branch}", base=base))
            if open_prs:
                pull = open_prs[0]
                if pull.title != title or (pull.body or "") != body:
                    pull.edit(title=title, body=body)
                return pull.number, pull.html_url, False
            pull = gh_repo.create_pull(base=base, head=branch, title=title, body=body)
            return pull.number, pull.html_url, True

        return self._call(repo, f"update pull request from {branch}", upsert)

    def close_pull_request(self, repo: str, branch: str) -> list[int]:
        """Closes the open PRs from ``branch`` (the pin caught up); returns their numbers."""
        gh_repo = self._repo(repo)
        owner = repo.split("/", 1)[0]

        return self._call(repo, f"close pull request from {branch}", lambda: _close_pulls(gh_repo, owner, branch))

    # -- plumbing ----------------------------------------------------------------------------
    def _repo(self, full_name: str) -> Repository:
        return self._github.get_repo(full_name)  # lazy: no request

    def _call(self, repo: str, action: str, operation: Callable[[], T]) -> T:
        attempt = 0
        while True:
            try:
                return operation()
            except GithubException as exc:
                failure = Failure(exc.status, _message(exc), exc.headers or {})
            except requests.RequestException as exc:
                failure = Failure(None, f"no answer from {self.api_url} ({type(exc).__name__})", {})
            decision = decide(failure, attempt, self._clock(), self._backoff)
            if decision.retry_in_s is None:
                if decision.give_up is GiveUp.CREDENTIALS:
                    whose = "the token" if self.has_token else "the request (no OOTCI_GITHUB_TOKEN set)"
                    raise GitHubConfigError(f"GitHub rejected {whose} for {repo}: {decision.reason}")
                raise GitHubUnavailable(f"GitHub could not {action} on {repo}: {decision.reason}")
            log.warning(
                "GitHub %s on %s failed (%s); retrying in %.1fs", action, repo, decision.reason, decision.retry_in_s
            )
            self._sleep(decision.retry_in_s)
            attempt += 1


def _close_pulls(repo: Repository, owner: str, branch: str) -> list[int]:
    closed = []
    for pull in repo.get_pulls(state="open", head=f"{owner}:{branch}"):
        pull.edit(state="closed")
        closed.append(pull.number)
    return closed


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _message(exc: GithubException) -> str:
    data = exc.data
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return str(data["message"]).splitlines()[0]
    return str(exc.message or data or "no message")[:200]


def _file_change(f: File) -> FileChange:
    return FileChange(
        filename=f.filename,
        status=f.status,
        previous_filename=f.previous_filename,
        patch=f.patch,
        additions=f.additions,
        deletions=f.deletions,
    )


def _branch_ref(repo: Repository, branch: str) -> GitRef | None:
    """The branch's ref, read (a lazy GitRef's URL is the read URL, which PATCH does not take)."""
    ref = repo.get_git_ref(f"heads/{branch}")
    try:
        ref.complete()
    except GithubException as exc:
        if exc.status == 404:
            return None
        raise
    return ref


def _file_text(repo: Repository, path: str, ref: str) -> str | None:
    contents = _file(repo, path, ref)
    return None if contents is None else contents.decoded_content.decode()


def _file_sha(repo: Repository, path: str, ref: str) -> str | None:
    contents = _file(repo, path, ref)
    return None if contents is None else contents.sha


def _file(repo: Repository, path: str, ref: str) -> ContentFile | None:
    try:
        found = repo.get_contents(path, ref=ref)
    except GithubException as exc:
        if exc.status == 404:
            return None
        raise
    if isinstance(found, list):
        raise GitHubUnavailable(f"{path} at {ref} is a directory, not a file")
    return found
