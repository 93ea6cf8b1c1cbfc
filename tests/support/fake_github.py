"""A fake GitHub REST API on loopback: a real HTTP server PyGithub can be pointed at.

It serves loaded data (repositories, commits, compare responses such as the recorded
culprit cases under ``evals/data/culprit/``), keeps state for the writes ootci makes
(comments, labels, statuses, refs, file contents, pull requests), records every request,
checks the token, and plays scripted faults (5xx, secondary and primary rate limits).

Shapes, status codes, error bodies, ``Link`` pagination and rate-limit headers follow
GitHub's REST reference. Use it as a context manager::

    with FakeGitHub(token="t0k") as fake:
        fake.add_repo("pytorch/pytorch")
        fake.load_compare_case(json.loads(path.read_text()))
        Github(base_url=fake.url, auth=Auth.Token("t0k")) ...

or through the ``fake_github`` pytest fixture of :mod:`tests.support.github_fixtures`
(``pytest_plugins = ["tests.support.github_fixtures"]`` in a test module or conftest).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

from service.domain.upstream import pr_number_from_message
from tests.support import github_shapes as shapes

JSON = dict[str, Any]
_REQUEST_BUDGET = 5000
_TITLE_SUFFIX = re.compile(r"\s*\(#\d+\)\s*$")


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str  # as sent, percent-encoded, without the query
    query: dict[str, list[str]]
    body: Any  # decoded JSON, or None
    authorization: str | None
    status: int  # what the fake answered

    @property
    def is_write(self) -> bool:
        return self.method != "GET"

    @property
    def succeeded(self) -> bool:
        return 200 <= self.status < 300


@dataclass
class Fault:
    """A scripted answer played instead of the real one, ``times`` times, to matching requests."""

    status: int
    body: JSON
    headers: dict[str, str] = field(default_factory=dict)
    method: str | None = None
    path: re.Pattern[str] | None = None
    times: int = 1
    # Computed when played, so a reset time is relative to the request, not to the script.
    headers_at: Callable[[float], dict[str, str]] | None = None
    # The request is carried out, then the fault answered: a write whose answer was lost.
    after_handling: bool = False

    def matches(self, method: str, path: str) -> bool:
        if self.times <= 0:
            return False
        if self.method is not None and self.method != method:
            return False
        return self.path is None or self.path.search(path) is not None


class HttpError(Exception):
    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.body = {**shapes.error(message, status), **extra}


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class RepoState:
    full_name: str
    default_branch: str = "main"
    commits: dict[str, JSON] = field(default_factory=dict)  # sha -> detail, with files
    parents: dict[str, list[str]] = field(default_factory=dict)
    trees: dict[str, dict[str, bytes]] = field(default_factory=dict)  # commit sha -> path -> bytes
    compares: dict[tuple[str, str], JSON] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)  # "heads/main" -> sha
    pulls: dict[int, JSON] = field(default_factory=dict)
    commit_pulls: dict[str, list[int]] = field(default_factory=dict)
    comments: dict[int, list[JSON]] = field(default_factory=dict)
    labels: dict[int, list[str]] = field(default_factory=dict)
    statuses: dict[str, list[JSON]] = field(default_factory=dict)

    def resolve(self, ref: str) -> str:
        """A branch name or a (possibly abbreviated) sha to a full commit sha."""
        ref = ref.removeprefix("refs/").removeprefix("heads/")
        if f"heads/{ref}" in self.refs:
            return self.refs[f"heads/{ref}"]
        if ref in self.commits or ref in self.parents:
            return ref
        known = set(self.commits) | set(self.parents) | {s for pair in self.compares for s in pair}
        matches = [sha for sha in known if len(ref) >= 7 and sha.startswith(ref)]
        if len(matches) == 1:
            return matches[0]
        raise HttpError(404, f"No commit found for SHA: {ref}")

    def is_ancestor(self, old: str, new: str) -> bool:
        seen: set[str] = set()
        todo = [new]
        while todo:
            sha = todo.pop()
            if sha == old:
                return True
            if sha not in seen:
                seen.add(sha)
                todo.extend(self.parents.get(sha, []))
        return False

    def pull(self, number: int) -> JSON:
        if number not in self.pulls:
            raise HttpError(404, "Not Found")
        return self.pulls[number]

    def next_issue_number(self) -> int:
        return max([0, *self.pulls, *self.comments]) + 1


Handler = Callable[["FakeGitHub", RepoState, Mapping[str, str], dict[str, list[str]], Any], Answer]
_ROUTES: list[tuple[str, re.Pattern[str], Handler]] = []


def route(method: str, pattern: str) -> Callable[[Handler], Handler]:
    regex = re.compile(r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)" + pattern + "$")

    def register(handler: Handler) -> Handler:
        _ROUTES.append((method, regex, handler))
        return handler

    return register


class FakeGitHub:
    """The server and its state. Thread-safe: one lock serialises request handling."""

    def __init__(self, token: str = "fake-github-token", login: str = "ootci-bot") -> None:
        self.token = token
        self.login = login
        self.repos: dict[str, RepoState] = {}
        self.requests: list[RecordedRequest] = []
        self.faults: list[Fault] = []
        self._lock = threading.RLock()
        self._ids = itertools.count(1_800_000_000)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._remaining = _REQUEST_BUDGET

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> FakeGitHub:
        fake = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out as two writes; without TCP_NODELAY each keep-alive
            # answer waits ~40 ms for the client's delayed ACK.
            disable_nagle_algorithm = True

            def _serve(self) -> None:
                fake._serve(self)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:  # requests are recorded instead
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-github", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "the fake GitHub is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- loading data --------------------------------------------------------------------
    def add_repo(self, full_name: str, default_branch: str = "main") -> RepoState:
        with self._lock:
            return self.repos.setdefault(full_name, RepoState(full_name, default_branch))

    def add_commit(self, repo: str, detail: JSON, tree: Mapping[str, bytes] | None = None) -> str:
        """A commit as ``GET .../commits/{sha}`` returns it (files included)."""
        state = self.add_repo(repo)
        with self._lock:
            sha = detail["sha"]
            state.commits[sha] = detail
            state.parents[sha] = [p["sha"] for p in detail.get("parents", [])]
            if tree is not None:
                state.trees[sha] = dict(tree)
            return sha

    def add_files_at(self, repo: str, sha: str, files: Mapping[str, bytes]) -> None:
        """Files the contents API serves at commit ``sha`` (``?ref=sha``), added to any it
        already has: real files, e.g. an installed torch's headers as the range base had them."""
        state = self.add_repo(repo)
        with self._lock:
            state.trees.setdefault(sha, {}).update(files)

    def add_compare(self, repo: str, response: JSON, base: str | None = None, head: str | None = None) -> None:
        state = self.add_repo(repo)
        commits = response.get("commits", [])
        base = base or response["base_commit"]["sha"]
        head = head or (commits[-1]["sha"] if commits else base)
        with self._lock:
            state.compares[(base, head)] = response

    def load_compare_case(self, case: Mapping[str, Any] | Path, repo: str | None = None) -> tuple[str, str]:
        """Load a case of the culprit corpus (evals/data/culprit/): ``{"compare": <compare
        response>, "commits": {sha: <commit response>}, "pulls": {sha: [<pull request>...]}
        (optional), "repository": "o/r" (optional)}``; other keys are ignored. Returns
        (base, head), the shas to compare."""
        if isinstance(case, Path):
            case = json.loads(case.read_text())
        repo = repo or str(case.get("repository") or "pytorch/pytorch")
        compare = case["compare"]
        for detail in case.get("commits", {}).values():
            self.add_commit(repo, detail)
        for sha, pulls in case.get("pulls", {}).items():
            for pr in pulls:
                self.add_pull(repo, pr, commits=[sha])
        self._add_landed_pulls(repo, case.get("commits", {}).values())
        listed = compare.get("commits", [])
        base = str(case.get("base") or compare["base_commit"]["sha"])
        head = str(case.get("head") or (listed[-1]["sha"] if listed else base))
        self.add_compare(repo, compare, base, head)
        return base, head

    def add_pull(self, repo: str, pr: JSON, commits: Sequence[str] = ()) -> int:
        state = self.add_repo(repo)
        with self._lock:
            number = int(pr["number"])
            state.pulls[number] = pr
            state.comments.setdefault(number, [])
            state.labels.setdefault(number, [label["name"] for label in pr.get("labels", [])])
            for sha in commits:
                state.commit_pulls.setdefault(sha, []).append(number)
            return number

    def _add_landed_pulls(self, repo: str, details: Iterable[JSON]) -> None:
        """The merged PR each commit names in its message, as GitHub has it: so labels and
        comments can be written on the PRs of a loaded range, and commit->pulls finds them."""
        state = self.add_repo(repo)
        for detail in details:
            number = pr_number_from_message(detail["commit"]["message"])
            if number is None or number in state.pulls:
                continue
            landed = detail["commit"]["committer"]["date"]
            title = _TITLE_SUFFIX.sub("", detail["commit"]["message"].split("\n", 1)[0]).strip()
            author = (detail.get("author") or {}).get("login") or "octocat"
            pr = shapes.pull_request(
                repo, number, title=title, head_ref=f"gh/{author}/{number}", head_sha=detail["sha"],
                state="closed", author=author, merged_at=landed, merge_commit_sha=detail["sha"],
                created_at=landed,
            )
            self.add_pull(repo, pr, commits=[detail["sha"]])

    def add_branch(self, repo: str, branch: str, files: Mapping[str, str], message: str = "initial") -> str:
        """A branch whose head commit holds ``files`` (on top of the branch's head if it exists)."""
        state = self.add_repo(repo)
        with self._lock:
            parent = state.refs.get(f"heads/{branch}")
            tree = dict(state.trees.get(parent, {})) if parent else {}
            tree.update({path: text.encode() for path, text in files.items()})
            sha = self._new_commit(state, message, [parent] if parent else [], tree)
            state.refs[f"heads/{branch}"] = sha
            return sha

    def seed_comments(self, repo: str, number: int, bodies: Sequence[str], author: str = "pytorch-bot[bot]") -> None:
        state = self.add_repo(repo)
        with self._lock:
            state.pull(number)
            for body in bodies:
                state.comments[number].append(
                    shapes.issue_comment(repo, number, next(self._ids), body, author, _now_iso())
                )

    # -- faults ----------------------------------------------------------------------------
    def inject(
        self,
        status: int,
        message: str,
        *,
        times: int = 1,
        method: str | None = None,
        path: str | None = None,
        headers: Mapping[str, str] | None = None,
        headers_at: Callable[[float], dict[str, str]] | None = None,
        documentation_url: str = "https://docs.github.com/rest",
        after_handling: bool = False,
    ) -> Fault:
        fault = Fault(
            status=status,
            body=shapes.error(message, status, documentation_url),
            headers=dict(headers or {}),
            method=method,
            path=re.compile(path) if path else None,
            times=times,
            headers_at=headers_at,
            after_handling=after_handling,
        )
        with self._lock:
            self.faults.append(fault)
        return fault

    def fail_with_5xx(self, times: int = 1, status: int = 502, **match: Any) -> Fault:
        return self.inject(status, "Server Error", times=times, **match)

    def secondary_rate_limit(self, retry_after: int, times: int = 1, status: int = 403, **match: Any) -> Fault:
        return self.inject(
            status,
            "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
            times=times,
            headers={"Retry-After": str(retry_after)},
            documentation_url="https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
            **match,
        )

    def primary_rate_limit(self, reset_in: int, times: int = 1, status: int = 403, **match: Any) -> Fault:
        def headers_at(now: float) -> dict[str, str]:
            return {
                "X-RateLimit-Limit": str(_REQUEST_BUDGET),
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Used": str(_REQUEST_BUDGET),
                "X-RateLimit-Reset": str(int(now) + reset_in),
                "X-RateLimit-Resource": "core",
            }

        return self.inject(
            status,
            f"API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID {hashlib.sha1(b'x').hexdigest()[:8].upper()}.",
            times=times,
            headers_at=headers_at,
            documentation_url="https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
            **match,
        )

    # -- inspection ------------------------------------------------------------------------
    def writes(self) -> list[RecordedRequest]:
        """Writes the fake accepted (2xx), in order."""
        with self._lock:
            return [r for r in self.requests if r.is_write and r.succeeded]

    def comments(self, repo: str, number: int) -> list[JSON]:
        with self._lock:
            return [dict(c) for c in self.repos[repo].comments.get(number, [])]

    def labels(self, repo: str, number: int) -> list[str]:
        with self._lock:
            return list(self.repos[repo].labels.get(number, []))

    def statuses(self, repo: str, sha: str) -> list[JSON]:
        with self._lock:
            return list(self.repos[repo].statuses.get(sha, []))

    def pulls(self, repo: str) -> list[JSON]:
        with self._lock:
            return [dict(p) for _, p in sorted(self.repos[repo].pulls.items())]

    def branch_head(self, repo: str, branch: str) -> str | None:
        with self._lock:
            return self.repos[repo].refs.get(f"heads/{branch}")

    def file_at(self, repo: str, ref: str, path: str) -> str | None:
        with self._lock:
            state = self.repos[repo]
            content = state.trees.get(state.resolve(ref), {}).get(path)
            return None if content is None else content.decode()

    def parents_of(self, repo: str, sha: str) -> list[str]:
        with self._lock:
            return list(self.repos[repo].parents.get(sha, []))

    # -- serving ---------------------------------------------------------------------------
    def _serve(self, http: BaseHTTPRequestHandler) -> None:
        method = http.command
        split = urlsplit(http.path)
        query = parse_qs(split.query)
        length = int(http.headers.get("Content-Length") or 0)
        raw = http.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        authorization = http.headers.get("Authorization")
        with self._lock:
            answer = self._answer(method, split.path, query, body, authorization)
            self.requests.append(RecordedRequest(method, split.path, query, body, authorization, answer.status))
        payload = b"" if answer.body is None else json.dumps(answer.body).replace(shapes.API, self.url).encode()
        http.send_response(answer.status)
        http.send_header("Content-Type", "application/json; charset=utf-8")
        http.send_header("Content-Length", str(len(payload)))
        for name, value in answer.headers.items():
            http.send_header(name, value.replace(shapes.API, self.url))
        http.end_headers()
        http.wfile.write(payload)

    def _answer(
        self, method: str, path: str, query: dict[str, list[str]], body: Any, authorization: str | None
    ) -> Answer:
        now = time.time()
        for fault in self.faults:
            if fault.matches(method, path):
                fault.times -= 1
                if fault.after_handling:
                    try:
                        self._check_token(method, authorization)
                        self._route(method, path, query, body)
                    except HttpError:
                        pass
                headers = {**fault.headers, **(fault.headers_at(now) if fault.headers_at else {})}
                return Answer(fault.status, fault.body, headers)
        self._remaining = max(self._remaining - 1, 0)
        limits = {
            "X-RateLimit-Limit": str(_REQUEST_BUDGET),
            "X-RateLimit-Remaining": str(self._remaining),
            "X-RateLimit-Used": str(_REQUEST_BUDGET - self._remaining),
            "X-RateLimit-Reset": str(int(now) + 3600),
            "X-RateLimit-Resource": "core",
            "X-GitHub-Api-Version-Selected": "2022-11-28",
        }
        try:
            self._check_token(method, authorization)
            answer = self._route(method, path, query, body)
        except HttpError as exc:
            answer = Answer(exc.status, exc.body)
        answer.headers = {**limits, **answer.headers}
        return answer

    def _check_token(self, method: str, authorization: str | None) -> None:
        if authorization is None:
            if method != "GET":  # GitHub serves public reads anonymously, never writes
                raise HttpError(401, "Requires authentication")
            return
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() not in {"token", "bearer"} or token != self.token:
            raise HttpError(401, "Bad credentials")

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Answer:
        for verb, regex, handler in _ROUTES:
            match = regex.match(path)
            if match and verb == method:
                full_name = f"{unquote(match['owner'])}/{unquote(match['repo'])}"
                if full_name not in self.repos:
                    raise HttpError(404, "Not Found")
                params = {k: unquote(v) for k, v in match.groupdict().items()}
                return handler(self, self.repos[full_name], params, query, body)
        raise HttpError(404, "Not Found")

    # -- helpers for handlers ----------------------------------------------------------------
    def _new_commit(self, state: RepoState, message: str, parents: list[str], tree: dict[str, bytes]) -> str:
        seed = json.dumps([message, parents, sorted((p, c.hex()) for p, c in tree.items()), next(self._ids)])
        sha = hashlib.sha1(seed.encode()).hexdigest()
        state.commits[sha] = shapes.commit(state.full_name, sha, message, parents=parents, files=[],
                                           author=self.login, date=_now_iso())
        state.parents[sha] = parents
        state.trees[sha] = tree
        return sha

    def _page(
        self,
        items: Sequence[Any],
        path: str,
        query: dict[str, list[str]],
        default: int = 30,
        maximum: int = 100,
    ) -> tuple[list[Any], dict[str, str]]:
        """One page of ``items`` and GitHub's ``Link`` header for the others."""
        per_page = min(max(int(_first(query, "per_page") or default), 1), maximum)
        page = max(int(_first(query, "page") or 1), 1)
        last = max((len(items) + per_page - 1) // per_page, 1)

        def link(n: int) -> str:
            params = {k: v[0] for k, v in query.items()}
            params.update(per_page=str(per_page), page=str(n))
            return f"<{self.url}{path}?{urlencode(params)}>"

        rels = []
        if page > 1:
            rels += [f'{link(page - 1)}; rel="prev"']
        if page < last:
            rels += [f'{link(page + 1)}; rel="next"', f'{link(last)}; rel="last"']
        if page > 1:
            rels += [f'{link(1)}; rel="first"']
        headers = {"Link": ", ".join(rels)} if rels else {}
        return list(items[(page - 1) * per_page: page * per_page]), headers


def _first(query: Mapping[str, list[str]], key: str) -> str | None:
    values = query.get(key)
    return values[0] if values else None


def _now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _require(body: Any, *keys: str) -> Mapping[str, Any]:
    if not isinstance(body, Mapping) or any(k not in body for k in keys):
        raise HttpError(422, "Invalid request.", errors=[f"{k!r} wasn't supplied." for k in keys])
    return body


# -- routes ---------------------------------------------------------------------------------


@route("GET", "")
def _get_repo(fake: FakeGitHub, state: RepoState, p: Mapping[str, str], q: dict[str, list[str]], b: Any) -> Answer:
    return Answer(200, shapes.repository(state.full_name, state.default_branch))


@route("GET", r"/compare/(?P<basehead>.+)")
def _compare(fake: FakeGitHub, state: RepoState, p: Mapping[str, str], q: dict[str, list[str]], b: Any) -> Answer:
    base_ref, sep, head_ref = p["basehead"].partition("...")
    if not sep:
        raise HttpError(404, "Not Found")
    base, head = state.resolve(base_ref), state.resolve(head_ref)
    response = state.compares.get((base, head)) or _compare_from_history(state, base, head)
    path = f"/repos/{state.full_name}/compare/{p['basehead']}"
    if "page" not in q and "per_page" not in q:
        # Unpaged, GitHub lists at most 250 commits and says nothing about the rest.
        return Answer(200, {**response, "commits": response["commits"][:250]})
    commits, headers = fake._page(response["commits"], path, q)
    # Paged, the file list of the whole comparison comes with the first page only.
    files = response.get("files", []) if _first(q, "page") in (None, "1") else []
    return Answer(200, {**response, "commits": commits, "files": files}, headers)


def _compare_from_history(state: RepoState, base: str, head: str) -> JSON:
    chain: list[str] = []
    sha: str | None = head
    while sha is not None and sha != base:
        chain.append(sha)
        parents = state.parents.get(sha, [])
        sha = parents[0] if parents else None
    if sha != base or base not in state.commits:
        raise HttpError(404, f"No common ancestor between {base} and {head}.")
    commits = [state.commits[s] for s in reversed(chain)]
    return shapes.compare(state.full_name, state.commits[base], commits)


@route("GET", r"/commits/(?P<sha>[^/]+)")
def _get_commit(fake: FakeGitHub, state: RepoState, p: Mapping[str, str], q: dict[str, list[str]], b: Any) -> Answer:
    sha = state.resolve(p["sha"])
    if sha not in state.commits:
        raise HttpError(422, f"No commit found for SHA: {p['sha']}")
    detail = state.commits[sha]
    files, headers = fake._page(detail.get("files", []), f"/repos/{state.full_name}/commits/{p['sha']}",
                                q, default=300, maximum=300)
    return Answer(200, {**detail, "files": files}, headers)


@route("GET", r"/commits/(?P<sha>[^/]+)/pulls")
def _commit_pulls(fake: FakeGitHub, state: RepoState, p: Mapping[str, str], q: dict[str, list[str]], b: Any) -> Answer:
    sha = state.resolve(p["sha"])
    pulls = [state.pulls[n] for n in state.commit_pulls.get(sha, [])]
    page, headers = fake._page(pulls, f"/repos/{state.full_name}/commits/{p['sha']}/pulls", q)
    return Answer(200, page, headers)


@route("GET", r"/pulls/(?P<number>\d+)")
def _get_pull(fake: FakeGitHub, state: RepoState, p: Mapping[str, str], q: dict[str, list[str]], b: Any) -> Answer:
    pr = state.pull(int(p["number"]))
    return Answer(200, {**pr, "labels": [shapes.label(state.full_name, n) for n in state.labels[pr["number"]]]})


@route("GET", r"/issues/(?P<number>\d+)")
def _get_issue(fake: FakeGitHub, state: RepoState, p: Mapping[str, str], q: dict[str, list[str]], b: Any) -> Answer:
    pr = state.pull(int(p["number"]))
    issue = {k: pr[k] for k in ("number", "title", "body", "state", "user", "created_at", "updated_at",
                                "closed_at", "html_url", "node_id")}
    issue.update(
        url=pr["issue_url"], id=pr["id"], comments=len(state.comments[pr["number"]]),
        labels=[shapes.label(state.full_name, n) for n in state.labels[pr["number"]]],
        pull_request={"url": pr["url"], "html_url": pr["html_url"]},
    )
    return Answer(200, issue)


@route("GET", r"/pulls")
def _list_pulls(fake: FakeGitHub, state: RepoState, p: Mapping[str, str], q: dict[str, list[str]], b: Any) -> Answer:
    wanted_state = _first(q, "state") or "open"
    head, base = _first(q, "head"), _first(q, "base")
    pulls = [
        pr for _, pr in sorted(state.pulls.items())
        if (wanted_state == "all" or pr["state"] == wanted_state)
        and (head is None or pr["head"]["label"] == head)
        and (base is None or pr["base"]["ref"] == base)
    ]
    page, headers = fake._page(pulls, f"/repos/{state.full_name}/pulls", q)
    return Answer(200, page, headers)


@route("POST", r"/pulls")
def _create_pull(fake: FakeGitHub, state: RepoState, p: Mapping[str, str], q: dict[str, list[str]], b: Any) -> Answer:
    body = _require(b, "head", "base")
    owner = state.full_name.split("/")[0]
    head_ref = str(body["head"]).split(":", 1)[-1]
    head_sha = state.refs.get(f"heads/{head_ref}")
    base_sha = state.refs.get(f"heads/{body['base']}")
    invalid = [f for f, sha in (("head", head_sha), ("base", base_sha)) if sha is None]
    if invalid:
        raise HttpError(422, "Validation Failed",
                        errors=[{"resource": "PullRequest", "field": f, "code": "invalid"} for f in invalid])
    assert head_sha is not None and base_sha is not None
    if state.is_ancestor(head_sha, base_sha):
        raise HttpError(422, "Validation Failed", errors=[{
            "resource": "PullRequest", "code": "custom",
            "message": f"No commits between {body['base']} and {head_ref}"}])
    for pr in state.pulls.values():
        if pr["state"] == "open" and pr["head"]["ref"] == head_ref and pr["base"]["ref"] == body["base"]:
            raise HttpError(422, "Validation Failed", errors=[{
                "resource": "PullRequest", "code": "custom",
                "message": f"A pull request already exists for {owner}:{head_ref}."}])
    number = state.next_issue_number()
    pr = shapes.pull_request(
        state.full_name, number, title=str(body.get("title", "")), body=str(body.get("body") or ""),
        head_ref=head_ref, head_sha=head_sha, base_ref=str(body["base"]), base_sha=base_sha,
        author=fake.login, created_at=_now_iso(),
    )
    fake.add_pull(state.full_name, pr)
    return Answer(201, pr)


@route("PATCH", r"/pulls/(?P<number>\d+)")
def _edit_pull(fake: FakeGitHub, state: RepoState, p: Mapping[str, str], q: dict[str, list[str]], b: Any) -> Answer:
    pr = state.pull(int(p["number"]))
    body = _require(b)
    if "state" in body and body["state"] not in ("open", "closed"):
        raise HttpError(422, "Validation Failed", errors=[{"resource": "PullRequest", "field": "state",
                                                            "code": "invalid"}])
    for key in ("title", "body", "state"):
        if key in body:
            pr[key] = body[key]
    if "base" in body:
        pr["base"]["ref"] = body["base"]
    pr["updated_at"] = _now_iso()
    pr["closed_at"] = pr["updated_at"] if pr["state"] == "closed" else None
    return Answer(200, pr)


@route("GET", r"/issues/(?P<number>\d+)/comments")
def _list_comments(fake: FakeGitHub, state: RepoState, p: Mapping[str, str], q: dict[str, list[str]], b: Any) -> Answer:
    number = int(p["number"])
    state.pull(number)
    page, headers = fake._page(state.comments[number], f"/repos/{state.full_name}/issues/{number}/comments", q)
    return Answer(200, page, headers)


@route("POST", r"/issues/(?P<number>\d+)/comments")
def _create_comment(fake: FakeGitHub, state: RepoState, p: Mapping[str, str], q: dict[str, list[str]], b: Any) -> Answer:
    number = int(p["number"])
    state.pull(number)
    body = _require(b, "body")
    comment = shapes.issue_comment(state.full_name, number, next(fake._ids), str(body["body"]), fake.login,
                                   _now_iso())
    state.comments[number].append(comment)
    return Answer(201, comment)


@route("PATCH", r"/issues/comments/(?P<comment_id>\d+)")
def _edit_comment(fake: FakeGitHub, state: RepoState, p: Mapping[str, str], q: dict[str, list[str]], b: Any) -> Answer:
    body = _require(b, "body")
    for comments in state.comments.values():
        for comment in comments:
            if comment["id"] == int(p["comment_id"]):
                comment["body"] = str(body["body"])
                comment["updated_at"] = _now_iso()
                return Answer(200, comment)
    raise HttpError(404, "Not Found")


@route("POST", r"/issues/(?P<number>\d+)/labels")
def _add_labels(fake: FakeGitHub, state: RepoState, p: Mapping[str, str], q: dict[str, list[str]], b: Any) -> Answer:
    number = int(p["number"])
    state.pull(number)
    names = b.get("labels") if isinstance(b, Mapping) else b
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise HttpError(422, "Invalid request.", errors=["'labels' must be a list of strings."])
    current = state.labels[number]
    current.extend(n for n in names if n not in current)
    return Answer(200, [shapes.label(state.full_name, n) for n in current])


@route("DELETE", r"/issues/(?P<number>\d+)/labels/(?P<name>[^/]+)")
def _remove_label(fake: FakeGitHub, state: RepoState, p: Mapping[str, str], q: dict[str, list[str]], b: Any) -> Answer:
    number = int(p["number"])
    state.pull(number)
    if p["name"] not in state.labels[number]:
        raise HttpError(404, "Label does not exist")
    state.labels[number].remove(p["name"])
    return Answer(200, [shapes.label(state.full_name, n) for n in state.labels[number]])


@route("POST", r"/statuses/(?P<sha>[0-9a-f]+)")
def _create_status(fake: FakeGitHub, state: RepoState, p: Mapping[str, str], q: dict[str, list[str]], b: Any) -> Answer:
    body = _require(b, "state")
    if body["state"] not in ("error", "failure", "pending", "success"):
        raise HttpError(422, "Validation Failed", errors=[{"resource": "Status", "field": "state",
                                                            "code": "custom"}])
    if len(str(body.get("description") or "")) > 140:
        raise HttpError(422, "Validation Failed", errors=[{
            "resource": "Status", "field": "description", "code": "custom",
            "message": "description is too long (maximum is 140 characters)"}])
    if p["sha"] not in state.commits:
        raise HttpError(422, f"No commit found for SHA: {p['sha']}")
    status = shapes.commit_status(state.full_name, next(fake._ids), p["sha"], body, fake.login, _now_iso())
    state.statuses.setdefault(p["sha"], []).append(status)
    return Answer(201, status)


@route("GET", r"/git/ref/(?P<ref>.+)")
def _get_ref(fake: FakeGitHub, state: RepoState, p: Mapping[str, str], q: dict[str, list[str]], b: Any) -> Answer:
    if p["ref"] not in state.refs:
        raise HttpError(404, "Not Found")
    return Answer(200, shapes.git_ref(state.full_name, f"refs/{p['ref']}", state.refs[p["ref"]]))


@route("POST", r"/git/refs")
def _create_ref(fake: FakeGitHub, state: RepoState, p: Mapping[str, str], q: dict[str, list[str]], b: Any) -> Answer:
    body = _require(b, "ref", "sha")
    ref = str(body["ref"])
    if not ref.startswith("refs/") or ref.count("/") < 2:
        raise HttpError(422, "Reference name is not valid")
    if ref.removeprefix("refs/") in state.refs:
        raise HttpError(422, "Reference already exists")
    if body["sha"] not in state.commits:
        raise HttpError(422, "Object does not exist")
    state.refs[ref.removeprefix("refs/")] = str(body["sha"])
    return Answer(201, shapes.git_ref(state.full_name, ref, str(body["sha"])))


@route("PATCH", r"/git/refs/(?P<ref>.+)")
def _update_ref(fake: FakeGitHub, state: RepoState, p: Mapping[str, str], q: dict[str, list[str]], b: Any) -> Answer:
    body = _require(b, "sha")
    if p["ref"] not in state.refs:
        raise HttpError(422, "Reference does not exist")
    new = str(body["sha"])
    if new not in state.commits:
        raise HttpError(422, "Object does not exist")
    if not body.get("force") and not state.is_ancestor(state.refs[p["ref"]], new):
        raise HttpError(422, "Update is not a fast forward")
    state.refs[p["ref"]] = new
    return Answer(200, shapes.git_ref(state.full_name, f"refs/{p['ref']}", new))


@route("GET", r"/contents/(?P<path>.+)")
def _get_contents(fake: FakeGitHub, state: RepoState, p: Mapping[str, str], q: dict[str, list[str]], b: Any) -> Answer:
    ref = _first(q, "ref") or state.default_branch
    sha = state.resolve(ref)
    content = state.trees.get(sha, {}).get(p["path"])
    if content is None:
        raise HttpError(404, "Not Found")
    return Answer(200, shapes.content_file(state.full_name, p["path"], content, ref))


@route("PUT", r"/contents/(?P<path>.+)")
def _put_contents(fake: FakeGitHub, state: RepoState, p: Mapping[str, str], q: dict[str, list[str]], b: Any) -> Answer:
    body = _require(b, "message", "content")
    branch = str(body.get("branch") or state.default_branch)
    parent = state.refs.get(f"heads/{branch}")
    if parent is None:
        raise HttpError(404, f"Branch {branch} not found")
    try:
        content = base64.b64decode(str(body["content"]), validate=True)
    except binascii.Error as exc:
        raise HttpError(422, "content is not valid Base64") from exc
    tree = dict(state.trees.get(parent, {}))
    existing = tree.get(p["path"])
    if existing is not None:
        if "sha" not in body:
            raise HttpError(422, "Invalid request.\n\n\"sha\" wasn't supplied.")
        if body["sha"] != shapes.blob_sha(existing):
            raise HttpError(409, f"{p['path']} does not match {body['sha']}")
    tree[p["path"]] = content
    sha = fake._new_commit(state, str(body["message"]), [parent], tree)
    state.refs[f"heads/{branch}"] = sha
    commit = state.commits[sha]
    return Answer(
        201 if existing is None else 200,
        {
            "content": shapes.content_file(state.full_name, p["path"], content, branch),
            "commit": {**commit["commit"], "sha": sha, "html_url": commit["html_url"],
                       "parents": commit["parents"]},
        },
    )
