"""GitHub REST API response bodies, built the way api.github.com shapes them.

Field names and nesting follow GitHub's REST reference ("Commits", "Pulls", "Issue
comments", "Git references", "Repository contents", "Commit statuses"); only fields a
client could plausibly read are filled in. URLs point at ``https://api.github.com`` like a
recorded response does; the fake server rewrites them to its own address when it serves
them, so recorded cases and built ones go through the same path.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

API = "https://api.github.com"
WEB = "https://github.com"

JSON = dict[str, Any]


def user(login: str) -> JSON:
    return {
        "login": login,
        "id": int(hashlib.sha1(login.encode()).hexdigest()[:7], 16),
        "type": "Bot" if login.endswith("[bot]") else "User",
        "url": f"{API}/users/{login}",
        "html_url": f"{WEB}/{login}",
    }


def repository(full_name: str, default_branch: str = "main") -> JSON:
    owner, name = full_name.split("/", 1)
    return {
        "id": int(hashlib.sha1(full_name.encode()).hexdigest()[:8], 16),
        "name": name,
        "full_name": full_name,
        "owner": user(owner),
        "private": False,
        "default_branch": default_branch,
        "url": f"{API}/repos/{full_name}",
        "html_url": f"{WEB}/{full_name}",
    }


def file_change(
    filename: str,
    status: str = "modified",
    patch: str | None = None,
    previous_filename: str | None = None,
) -> JSON:
    """One entry of a commit's ``files``: counts come from the patch, like GitHub's."""
    lines = (patch or "").splitlines()
    additions = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    deletions = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    entry: JSON = {
        "sha": hashlib.sha1(f"{filename}\0{patch}".encode()).hexdigest(),
        "filename": filename,
        "status": status,
        "additions": additions,
        "deletions": deletions,
        "changes": additions + deletions,
        "blob_url": f"{WEB}/blob/{filename}",
        "raw_url": f"{WEB}/raw/{filename}",
    }
    if patch is not None:
        entry["patch"] = patch
    if previous_filename is not None:
        entry["previous_filename"] = previous_filename
    return entry


def commit(
    repo: str,
    sha: str,
    message: str,
    *,
    parents: Sequence[str] = (),
    files: Sequence[JSON] | None = None,
    author: str = "pytorchmergebot",
    date: str = "2026-11-20T12:00:00Z",
) -> JSON:
    """A commit as ``GET /repos/{o}/{r}/commits/{sha}`` returns it (with ``files``), or,
    with ``files=None``, as the compare API lists it (without)."""
    signature = {"name": author, "email": f"{author}@users.noreply.github.com", "date": date}
    body: JSON = {
        "url": f"{API}/repos/{repo}/commits/{sha}",
        "sha": sha,
        "node_id": "C_" + sha[:20],
        "html_url": f"{WEB}/{repo}/commit/{sha}",
        "comments_url": f"{API}/repos/{repo}/commits/{sha}/comments",
        "commit": {
            "url": f"{API}/repos/{repo}/git/commits/{sha}",
            "author": signature,
            "committer": signature,
            "message": message,
            "tree": {"sha": hashlib.sha1(f"tree {sha}".encode()).hexdigest(),
                     "url": f"{API}/repos/{repo}/git/trees/{sha}"},
            "comment_count": 0,
        },
        "author": user(author),
        "committer": user(author),
        "parents": [
            {"sha": p, "url": f"{API}/repos/{repo}/commits/{p}", "html_url": f"{WEB}/{repo}/commit/{p}"}
            for p in parents
        ],
    }
    if files is not None:
        additions = sum(f["additions"] for f in files)
        deletions = sum(f["deletions"] for f in files)
        body["stats"] = {"total": additions + deletions, "additions": additions, "deletions": deletions}
        body["files"] = list(files)
    return body


def without_files(detail: Mapping[str, Any]) -> JSON:
    """The compare API's entry for a commit: the commit response minus files and stats."""
    return {k: v for k, v in detail.items() if k not in {"files", "stats"}}


def compare(repo: str, base: JSON, commits: Sequence[JSON], files: Iterable[JSON] = ()) -> JSON:
    """``GET /repos/{o}/{r}/compare/{base}...{head}``: commits oldest first, like git log --reverse."""
    head = commits[-1]["sha"] if commits else base["sha"]
    basehead = f"{base['sha']}...{head}"
    return {
        "url": f"{API}/repos/{repo}/compare/{basehead}",
        "html_url": f"{WEB}/{repo}/compare/{basehead}",
        "permalink_url": f"{WEB}/{repo}/compare/{basehead}",
        "diff_url": f"{WEB}/{repo}/compare/{basehead}.diff",
        "patch_url": f"{WEB}/{repo}/compare/{basehead}.patch",
        "base_commit": without_files(base),
        "merge_base_commit": without_files(base),
        "status": "ahead" if commits else "identical",
        "ahead_by": len(commits),
        "behind_by": 0,
        "total_commits": len(commits),
        "commits": [without_files(c) for c in commits],
        "files": list(files),
    }


def pull_request(
    repo: str,
    number: int,
    *,
    title: str,
    body: str = "",
    head_ref: str,
    head_sha: str,
    base_ref: str = "main",
    base_sha: str = "",
    state: str = "open",
    author: str = "octocat",
    merged_at: str | None = None,
    merge_commit_sha: str | None = None,
    head_repo: str | None = None,
    created_at: str = "2026-11-20T12:00:00Z",
) -> JSON:
    head_full = head_repo or repo
    return {
        "url": f"{API}/repos/{repo}/pulls/{number}",
        "id": 1_000_000 + number,
        "node_id": f"PR_{number}",
        "html_url": f"{WEB}/{repo}/pull/{number}",
        "diff_url": f"{WEB}/{repo}/pull/{number}.diff",
        "issue_url": f"{API}/repos/{repo}/issues/{number}",
        "comments_url": f"{API}/repos/{repo}/issues/{number}/comments",
        "statuses_url": f"{API}/repos/{repo}/statuses/{head_sha}",
        "number": number,
        "state": state,
        "locked": False,
        "title": title,
        "body": body,
        "user": user(author),
        "labels": [],
        "created_at": created_at,
        "updated_at": created_at,
        "closed_at": None if state == "open" else created_at,
        "merged_at": merged_at,
        "merge_commit_sha": merge_commit_sha,
        "draft": False,
        "head": {
            "label": f"{head_full.split('/')[0]}:{head_ref}",
            "ref": head_ref,
            "sha": head_sha,
            "user": user(head_full.split("/")[0]),
            "repo": repository(head_full),
        },
        "base": {
            "label": f"{repo.split('/')[0]}:{base_ref}",
            "ref": base_ref,
            "sha": base_sha,
            "user": user(repo.split("/")[0]),
            "repo": repository(repo),
        },
    }


def label(repo: str, name: str) -> JSON:
    return {
        "id": int(hashlib.sha1(name.encode()).hexdigest()[:8], 16),
        "node_id": "LA_" + hashlib.sha1(name.encode()).hexdigest()[:12],
        "url": f"{API}/repos/{repo}/labels/{name}",
        "name": name,
        "color": "d93f0b",
        "default": False,
        "description": None,
    }


def issue_comment(
    repo: str, number: int, comment_id: int, body: str, author: str, at: str
) -> JSON:
    return {
        "id": comment_id,
        "node_id": f"IC_{comment_id}",
        "url": f"{API}/repos/{repo}/issues/comments/{comment_id}",
        "html_url": f"{WEB}/{repo}/pull/{number}#issuecomment-{comment_id}",
        "issue_url": f"{API}/repos/{repo}/issues/{number}",
        "body": body,
        "user": user(author),
        "created_at": at,
        "updated_at": at,
        "author_association": "NONE",
    }


def commit_status(
    repo: str, status_id: int, sha: str, payload: Mapping[str, Any], creator: str, at: str
) -> JSON:
    return {
        "url": f"{API}/repos/{repo}/statuses/{sha}",
        "id": status_id,
        "node_id": f"SC_{status_id}",
        "state": payload["state"],
        "description": payload.get("description"),
        "target_url": payload.get("target_url"),
        "context": payload.get("context", "default"),
        "created_at": at,
        "updated_at": at,
        "creator": user(creator),
    }


def git_ref(repo: str, ref: str, sha: str) -> JSON:
    return {
        "ref": ref,
        "node_id": "REF_" + hashlib.sha1(ref.encode()).hexdigest()[:12],
        "url": f"{API}/repos/{repo}/git/{ref}",
        "object": {"type": "commit", "sha": sha, "url": f"{API}/repos/{repo}/git/commits/{sha}"},
    }


def blob_sha(content: bytes) -> str:
    """Git's blob id, which is what the contents API calls a file's ``sha``."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def content_file(repo: str, path: str, content: bytes, ref: str) -> JSON:
    sha = blob_sha(content)
    encoded = base64.encodebytes(content).decode()  # GitHub wraps base64 at 60 columns too
    return {
        "type": "file",
        "encoding": "base64",
        "size": len(content),
        "name": path.rsplit("/", 1)[-1],
        "path": path,
        "content": encoded,
        "sha": sha,
        "url": f"{API}/repos/{repo}/contents/{path}?ref={ref}",
        "git_url": f"{API}/repos/{repo}/git/blobs/{sha}",
        "html_url": f"{WEB}/{repo}/blob/{ref}/{path}",
        "download_url": f"https://raw.githubusercontent.com/{repo}/{ref}/{path}",
        "_links": {
            "self": f"{API}/repos/{repo}/contents/{path}?ref={ref}",
            "git": f"{API}/repos/{repo}/git/blobs/{sha}",
            "html": f"{WEB}/{repo}/blob/{ref}/{path}",
        },
    }


def error(message: str, status: int, documentation_url: str = "https://docs.github.com/rest") -> JSON:
    return {"message": message, "documentation_url": documentation_url, "status": str(status)}
