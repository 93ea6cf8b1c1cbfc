"""The GitHub adapter driving real PyGithub against the loopback fake GitHub over HTTP.

Waits are real decisions made from real response headers; only the sleeping itself is
recorded instead of done, so the tests can assert how long the client would have waited.
"""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from evals.paths import CULPRIT_CASES
from service.config import Settings
from service.github.client import GitHubClient
from service.github.errors import GitHubConfigError, GitHubUnavailable
from service.github.retry import Backoff
from tests.support import github_shapes as shapes
from tests.support.fake_github import FakeGitHub

UPSTREAM = "pytorch/pytorch"
VENDOR = "acme/torch-acme"
PIN_FILE = ".ci/pytorch-pin.txt"
MARKER = "<!-- ootci:breakage:7 -->"

pytestmark = pytest.mark.timeout(120)
pytest_plugins = ["tests.support.github_fixtures"]


class RecordedSleep:
    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def fake(fake_github: FakeGitHub) -> FakeGitHub:
    return fake_github


@pytest.fixture
def sleeps() -> RecordedSleep:
    return RecordedSleep()


def make_client(fake: FakeGitHub, sleeps: RecordedSleep, token: str | None = None, **kw: Any) -> GitHubClient:
    return GitHubClient(
        fake.url, fake.token if token is None else token, UPSTREAM,
        write_interval_s=0, sleep=sleeps, **kw,
    )


@pytest.fixture
def client(fake: FakeGitHub, sleeps: RecordedSleep) -> GitHubClient:
    return make_client(fake, sleeps)


def sha_of(i: int) -> str:
    return hashlib.sha1(f"upstream commit {i}".encode()).hexdigest()


def upstream_case(n: int) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A recorded-shaped case of ``n`` commits after a base, in the culprit corpus's shape
    (``compare``, ``commits`` by sha, ``pulls`` by sha). Commit i names its PR in the title
    when i % 3 == 0, in the merge-bot trailer when i % 3 == 1, and nowhere otherwise; those
    are found through the commit->pulls API (i % 6 == 2) or have no PR at all (i % 6 == 5).
    Returns the case and the expectations by sha."""
    base = shapes.commit(UPSTREAM, sha_of(0), "base", files=[])
    details, pulls, expected = [], {}, {}
    parent = base["sha"]
    for i in range(1, n + 1):
        sha = sha_of(i)
        pr = 100_000 + i
        if i % 3 == 0:
            message = f"[c10] change {i} (#{pr})"
        elif i % 3 == 1:
            message = f"change {i}\n\nPull Request resolved: https://github.com/pytorch/pytorch/pull/{pr}\nApproved by: https://github.com/someone"
        else:
            message = f"change {i} landed without a PR reference"
        count = 150 if i == 42 else 1 + i % 3
        files = [
            shapes.file_change(f"c10/core/file_{i}_{k}.h", "modified",
                               f"@@ -1,2 +1,2 @@\n-int old_{i}_{k}();\n+int new_{i}_{k}();")
            for k in range(count)
        ]
        detail = shapes.commit(UPSTREAM, sha, message, parents=[parent], files=files,
                               date=f"2026-11-{1 + i % 28:02d}T10:00:00Z")
        details.append(detail)
        parent = sha
        if i % 6 == 2:
            # GitHub lists every PR that contains the commit; the merging one is not first.
            other = shapes.pull_request(UPSTREAM, pr + 50_000, title="a stacked PR", head_ref="stack",
                                        head_sha=sha, state="closed")
            merging = shapes.pull_request(UPSTREAM, pr, title=f"change {i}", head_ref=f"b{i}", head_sha=sha,
                                          state="closed", merged_at="2026-11-20T10:00:00Z", merge_commit_sha=sha)
            pulls[sha] = [other, merging]
        wanted_pr = None if i % 6 == 5 else pr
        expected[sha] = {"pr": wanted_pr, "message": message, "files": files}
    case = {"compare": shapes.compare(UPSTREAM, base, details), "commits": {d["sha"]: d for d in [base, *details]},
            "pulls": pulls}
    return case, expected


def open_upstream_pr(fake: FakeGitHub, number: int = 123_456) -> int:
    head = fake.add_commit(UPSTREAM, shapes.commit(UPSTREAM, sha_of(999), "the suspect (#123456)", files=[]))
    return fake.add_pull(UPSTREAM, shapes.pull_request(UPSTREAM, number, title="the suspect", head_ref="suspect",
                                                        head_sha=head))


# -- the fake itself, as a plain HTTP client sees it ----------------------------------------------


def _get(url: str, authorization: str | None = None) -> tuple[int, dict[str, str], Any]:
    request = urllib.request.Request(url, headers={"Authorization": authorization} if authorization else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


def test_the_fake_checks_tokens_and_pages_like_github(fake: FakeGitHub) -> None:
    pr = open_upstream_pr(fake)
    fake.seed_comments(UPSTREAM, pr, [f"c{i}" for i in range(5)])
    url = f"{fake.url}/repos/{UPSTREAM}/issues/{pr}/comments?per_page=2&page=2"

    status, headers, page = _get(url, f"Bearer {fake.token}")
    assert status == 200 and [c["body"] for c in page] == ["c2", "c3"]
    links = dict(reversed(part.split("; rel=")) for part in headers["Link"].split(", "))
    assert links['"next"'].endswith("per_page=2&page=3>") and links['"last"'].endswith("page=3>")
    assert links['"prev"'].endswith("page=1>") and links['"first"'].endswith("page=1>")
    assert all(c["url"].startswith(f"{fake.url}/repos/") for c in page), "URLs point back at the fake"

    status, _, body = _get(url, "token not-the-token")
    assert (status, body["message"], body["documentation_url"]) == (401, "Bad credentials", "https://docs.github.com/rest")
    assert [r.authorization for r in fake.requests] == [f"Bearer {fake.token}", "token not-the-token"]


# -- reading the range -------------------------------------------------------------------------


def test_compare_longer_than_a_page_returns_every_commit_in_order_with_files_and_prs(
    fake: FakeGitHub, client: GitHubClient
) -> None:
    case, expected = upstream_case(230)
    base, head = fake.load_compare_case(case)

    commits = client.compare(base, head)

    assert [c.sha for c in commits] == [sha_of(i) for i in range(1, 231)]
    for c in commits:
        want = expected[c.sha]
        assert c.message == want["message"]
        assert c.pr == want["pr"], c.title
        assert [(f.filename, f.status, f.patch, f.additions, f.deletions) for f in c.files] == [
            (f["filename"], f["status"], f["patch"], 1, 1) for f in want["files"]
        ]
    assert len(commits[41].files) == 150  # more files than one page of the commit endpoint
    compare_pages = [r.query.get("page") for r in fake.requests if "/compare/" in r.path]
    assert compare_pages == [["1"], ["2"], ["3"]]
    pulls_lookups = {r.path.split("/")[-2] for r in fake.requests if r.path.endswith("/pulls")}
    assert pulls_lookups == {sha_of(i) for i in range(1, 231) if i % 3 == 2}, "pulls API only without a message PR"
    assert not fake.writes()


def test_the_prs_a_loaded_range_names_can_be_labelled_and_commented(fake: FakeGitHub, client: GitHubClient) -> None:
    case, expected = upstream_case(6)
    fake.load_compare_case(case)
    named = expected[sha_of(3)]["pr"]  # named by its title suffix only

    client.add_label(named, "module: PrivateUse1-break")
    client.upsert_comment(named, MARKER, "breaks acme")

    assert fake.labels(UPSTREAM, named) == ["module: PrivateUse1-break"]
    [pr] = [p for p in fake.pulls(UPSTREAM) if p["number"] == named]
    assert (pr["title"], pr["state"], pr["merge_commit_sha"]) == ("[c10] change 3", "closed", sha_of(3))


def test_compare_of_an_unknown_range_is_unavailable_not_empty(fake: FakeGitHub, client: GitHubClient) -> None:
    with pytest.raises(GitHubUnavailable, match=r"compare .* on pytorch/pytorch: 404"):
        client.compare("a" * 40, "b" * 40)


# -- writes on an upstream PR --------------------------------------------------------------


def test_comment_upsert_creates_one_then_edits_it_in_place_even_on_page_two(
    fake: FakeGitHub, client: GitHubClient
) -> None:
    pr = open_upstream_pr(fake)
    fake.seed_comments(UPSTREAM, pr, [f"review comment {i}" for i in range(120)])

    first_id, first_url, created = client.upsert_comment(pr, MARKER, "breaks acme (1 backend)")
    assert created
    assert first_url.endswith(f"/pull/{pr}#issuecomment-{first_id}")

    fake.seed_comments(UPSTREAM, pr, [f"later comment {i}" for i in range(30)])  # ours is now on page 2 of 2
    second_id, _, created_again = client.upsert_comment(pr, MARKER, "breaks acme and bolt (2 backends)")
    same_id, _, created_third = client.upsert_comment(pr, MARKER, "breaks acme and bolt (2 backends)")

    ours = [c for c in fake.comments(UPSTREAM, pr) if MARKER in c["body"]]
    assert (second_id, same_id, created_again, created_third) == (first_id, first_id, False, False)
    assert len(ours) == 1 and ours[0]["id"] == first_id
    assert ours[0]["body"].startswith("breaks acme and bolt (2 backends)")
    assert [(w.method, w.path.rsplit("/", 2)[-2]) for w in fake.writes()] == [("POST", str(pr)), ("PATCH", "comments")]
    assert any(r.query.get("page") == ["2"] for r in fake.requests if r.path.endswith("/comments"))


def test_labels_are_added_once_and_removed_idempotently(fake: FakeGitHub, client: GitHubClient) -> None:
    pr = open_upstream_pr(fake)
    label = "module: PrivateUse1-break"

    client.add_label(pr, label)
    client.add_label(pr, label)
    assert fake.labels(UPSTREAM, pr) == [label]

    assert client.remove_label(pr, label) is True
    assert fake.labels(UPSTREAM, pr) == []
    assert client.remove_label(pr, label) is False
    deletes = [r.path for r in fake.requests if r.method == "DELETE"]
    assert deletes == [f"/repos/{UPSTREAM}/issues/{pr}/labels/module%3A%20PrivateUse1-break"] * 2


def test_status_lands_on_the_head_sha(fake: FakeGitHub, client: GitHubClient) -> None:
    pr = open_upstream_pr(fake)
    head = fake.pulls(UPSTREAM)[0]["head"]["sha"]
    assert pr

    status_id = client.set_status(head, "failure", "ootci/acme", "x" * 200, "https://ootci.example/runs/9")

    [status] = fake.statuses(UPSTREAM, head)
    assert status["id"] == status_id
    assert (status["state"], status["context"], status["target_url"]) == (
        "failure", "ootci/acme", "https://ootci.example/runs/9")
    assert len(status["description"]) == 140 and status["description"].endswith("x\u2026")


# -- the weekly pin-bump PR ------------------------------------------------------------------


def test_bump_pr_is_opened_once_updated_in_place_then_closed(fake: FakeGitHub, client: GitHubClient) -> None:
    fake.add_repo(VENDOR)
    fake.add_branch(VENDOR, "main", {PIN_FILE: "nightly:2026-11-01\n", "README.md": "acme\n"})
    branch = "ootci/pin-bump"

    number, url, created = client.upsert_pull_request(
        VENDOR, branch, "main", PIN_FILE, "nightly:2026-11-16\n", "Bump PyTorch to nightly:2026-11-16", "week 47")
    assert created and url.endswith(f"/{VENDOR}/pull/{number}")
    assert fake.file_at(VENDOR, branch, PIN_FILE) == "nightly:2026-11-16\n"
    assert fake.file_at(VENDOR, "main", PIN_FILE) == "nightly:2026-11-01\n"

    # A week later main has moved on; the same PR carries the new pin, one commit on today's main.
    new_main = fake.add_branch(VENDOR, "main", {"src/acme.cpp": "// more\n"}, message="vendor work")
    again, _, created_again = client.upsert_pull_request(
        VENDOR, branch, "main", PIN_FILE, "nightly:2026-11-23\n", "Bump PyTorch to nightly:2026-11-23", "week 48")
    assert (again, created_again) == (number, False)
    head = fake.branch_head(VENDOR, branch)
    assert head is not None and fake.parents_of(VENDOR, head) == [new_main]
    assert fake.file_at(VENDOR, branch, PIN_FILE) == "nightly:2026-11-23\n"
    [pr] = fake.pulls(VENDOR)
    assert (pr["title"], pr["body"], pr["state"]) == ("Bump PyTorch to nightly:2026-11-23", "week 48", "open")

    # Nothing changed since: nothing is written.
    writes_before = len(fake.writes())
    assert client.upsert_pull_request(
        VENDOR, branch, "main", PIN_FILE, "nightly:2026-11-23\n", "Bump PyTorch to nightly:2026-11-23", "week 48"
    ) == (number, url, False)
    assert len(fake.writes()) == writes_before

    assert client.close_pull_request(VENDOR, branch) == [number]
    assert fake.pulls(VENDOR)[0]["state"] == "closed"
    assert client.close_pull_request(VENDOR, branch) == []


def test_bump_pr_is_closed_once_the_base_holds_the_pin(fake: FakeGitHub, client: GitHubClient) -> None:
    fake.add_repo(VENDOR)
    fake.add_branch(VENDOR, "main", {PIN_FILE: "nightly:2026-11-01\n"})
    branch = "ootci/pin-bump"
    opened = client.upsert_pull_request(VENDOR, branch, "main", PIN_FILE, "nightly:2026-11-16\n", "Bump", "")
    assert opened is not None

    fake.add_branch(VENDOR, "main", {PIN_FILE: "nightly:2026-11-16\n"}, message="vendor bumped by hand")
    assert client.upsert_pull_request(VENDOR, branch, "main", PIN_FILE, "nightly:2026-11-16\n", "Bump", "") is None

    [pr] = fake.pulls(VENDOR)
    assert (pr["number"], pr["state"]) == (opened[0], "closed")


# -- failures ----------------------------------------------------------------------------------


def test_502_then_200_delivers_the_comment_exactly_once(
    fake: FakeGitHub, client: GitHubClient, sleeps: RecordedSleep
) -> None:
    pr = open_upstream_pr(fake)
    fake.fail_with_5xx(times=2, status=502, method="POST", path=r"/issues/\d+/comments$")

    _, _, created = client.upsert_comment(pr, MARKER, "breaks acme")

    assert created
    assert len(fake.comments(UPSTREAM, pr)) == 1
    assert sleeps.waits == [1.0, 2.0]  # exponential backoff between the three tries
    posts = [r.status for r in fake.requests if r.method == "POST"]
    assert posts == [502, 502, 201]


def test_a_comment_whose_answer_was_lost_is_found_again_not_posted_twice(
    fake: FakeGitHub, client: GitHubClient, sleeps: RecordedSleep
) -> None:
    pr = open_upstream_pr(fake)
    # GitHub stored the comment, then the proxy in front of it answered 502.
    fake.fail_with_5xx(times=1, status=502, method="POST", path=r"/comments$", after_handling=True)

    comment_id, _, created = client.upsert_comment(pr, MARKER, "breaks acme")

    [stored] = fake.comments(UPSTREAM, pr)
    assert stored["id"] == comment_id and not created
    assert [r.method for r in fake.requests if r.method != "GET"] == ["POST"]
    assert sleeps.waits == [1.0]


def test_a_lasting_outage_raises_unavailable_and_a_later_call_delivers(
    fake: FakeGitHub, sleeps: RecordedSleep
) -> None:
    client = make_client(fake, sleeps, backoff=Backoff(max_retries=2))
    pr = open_upstream_pr(fake)
    fault = fake.fail_with_5xx(times=10, status=503, method="POST")

    with pytest.raises(GitHubUnavailable, match=r"comment on #123456 on pytorch/pytorch: 503 Server Error \(gave up after 3 tries\)"):
        client.upsert_comment(pr, MARKER, "breaks acme")
    assert fake.comments(UPSTREAM, pr) == [] and len(sleeps.waits) == 2

    fault.times = 0  # GitHub is back; the outbox tries again
    client.upsert_comment(pr, MARKER, "breaks acme")
    assert len(fake.comments(UPSTREAM, pr)) == 1


def test_secondary_rate_limit_waits_retry_after_then_delivers(
    fake: FakeGitHub, client: GitHubClient, sleeps: RecordedSleep
) -> None:
    pr = open_upstream_pr(fake)
    fake.secondary_rate_limit(retry_after=7, method="POST")

    client.add_label(pr, "module: PrivateUse1-break")

    assert sleeps.waits == [7.0]
    assert fake.labels(UPSTREAM, pr) == ["module: PrivateUse1-break"]


@pytest.mark.parametrize("status", [403, 429])
def test_primary_rate_limit_waits_until_the_reset_then_delivers(
    fake: FakeGitHub, client: GitHubClient, sleeps: RecordedSleep, status: int
) -> None:
    pr = open_upstream_pr(fake)
    fake.primary_rate_limit(reset_in=30, status=status, path=r"/comments$")

    client.upsert_comment(pr, MARKER, "breaks acme")

    [wait] = sleeps.waits
    assert 29.0 <= wait <= 31.5, wait  # until X-RateLimit-Reset, plus a second for clock drift
    assert len(fake.comments(UPSTREAM, pr)) == 1


def test_a_rate_limit_reset_too_far_away_is_left_to_the_outbox(
    fake: FakeGitHub, client: GitHubClient, sleeps: RecordedSleep
) -> None:
    pr = open_upstream_pr(fake)
    fake.primary_rate_limit(reset_in=3600)

    with pytest.raises(GitHubUnavailable, match="API rate limit exceeded .*asks to wait 3[56]\\d\\ds"):
        client.add_label(pr, "x")
    assert sleeps.waits == [] and not fake.writes()


def test_a_bad_token_is_a_config_error_with_one_clear_line_and_no_write(
    fake: FakeGitHub, sleeps: RecordedSleep, caplog: pytest.LogCaptureFixture
) -> None:
    pr = open_upstream_pr(fake)
    client = make_client(fake, sleeps, token="ghp_wrong_token_value")

    with pytest.raises(GitHubConfigError) as raised:
        client.upsert_comment(pr, MARKER, "breaks acme")

    assert str(raised.value) == "GitHub rejected the token for pytorch/pytorch: 401 Bad credentials"
    assert not fake.writes() and sleeps.waits == []
    assert all(r.authorization == "token ghp_wrong_token_value" for r in fake.requests)


def test_a_403_that_is_not_a_rate_limit_is_a_config_error(fake: FakeGitHub, client: GitHubClient) -> None:
    pr = open_upstream_pr(fake)
    fake.inject(403, "Resource not accessible by personal access token", method="POST")

    with pytest.raises(GitHubConfigError, match="^GitHub rejected the token for pytorch/pytorch: 403 Resource not accessible"):
        client.add_label(pr, "x")


def test_without_a_token_reads_work_and_writes_say_so(fake: FakeGitHub, sleeps: RecordedSleep) -> None:
    case, _ = upstream_case(3)
    base, head = fake.load_compare_case(case)
    client = make_client(fake, sleeps, token="")
    pr = open_upstream_pr(fake)

    assert len(client.compare(base, head)) == 3
    with pytest.raises(GitHubConfigError, match=r"no OOTCI_GITHUB_TOKEN set\) for pytorch/pytorch: 401 Requires authentication"):
        client.add_label(pr, "x")
    assert all(r.authorization is None for r in fake.requests)


def test_nobody_answering_is_unavailable_after_bounded_retries(sleeps: RecordedSleep) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = GitHubClient(f"http://127.0.0.1:{port}", "t", backoff=Backoff(max_retries=3), sleep=sleeps,
                          timeout_s=2, write_interval_s=0)

    with pytest.raises(GitHubUnavailable, match=r"no answer from http://127.0.0.1:\d+ \(ConnectionError\) \(gave up after 4 tries\)"):
        client.set_status("a" * 40, "success", "ootci/acme", "ok")
    assert sleeps.waits == [1.0, 2.0, 4.0]


def test_the_token_never_reaches_logs_or_messages(
    fake: FakeGitHub, sleeps: RecordedSleep, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # PyGithub logs every request and response at DEBUG
    client = make_client(fake, sleeps)
    pr = open_upstream_pr(fake)
    fake.fail_with_5xx(times=1, method="POST")

    client.upsert_comment(pr, MARKER, "breaks acme")
    with pytest.raises(GitHubConfigError) as raised:
        make_client(fake, sleeps, token=fake.token + "x").add_label(pr, "x")

    assert any("POST" in r.getMessage() for r in caplog.records), "PyGithub's request log was captured"
    assert fake.token not in caplog.text
    assert fake.token not in str(raised.value) and fake.token not in repr(client)


def test_settings_configure_the_client(fake: FakeGitHub, sleeps: RecordedSleep) -> None:
    settings = Settings(github_api_url=fake.url, github_token=fake.token, upstream_repo="pytorch/pytorch",
                        github_timeout_s=5, github_max_retries=1)
    client = GitHubClient.from_settings(settings, sleep=sleeps, write_interval_s=0)
    pr = open_upstream_pr(fake)
    fake.fail_with_5xx(times=5, method="POST")

    with pytest.raises(GitHubUnavailable, match=r"gave up after 2 tries"):
        client.add_label(pr, "x")
    assert client.upstream_repo == "pytorch/pytorch" and sleeps.waits == [1.0]


# -- the culprit corpus through the adapter ----------------------------------------------------

CASES = sorted(CULPRIT_CASES.glob("*.json"))


@pytest.mark.parametrize("case_path", CASES, ids=[p.stem for p in CASES])
def test_every_culprit_case_reads_back_through_pygithub_unchanged(
    fake: FakeGitHub, client: GitHubClient, case_path: Path
) -> None:
    case = json.loads(case_path.read_text())
    base, head = fake.load_compare_case(case)

    commits = client.compare(base, head)

    assert [c.sha for c in commits] == [c["sha"] for c in case["compare"]["commits"]]
    for c in commits:
        recorded = case["commits"][c.sha]
        assert c.message == recorded["commit"]["message"]
        assert [(f.filename, f.status, f.previous_filename, f.patch) for f in c.files] == [
            (f["filename"], f["status"], f.get("previous_filename"), f.get("patch")) for f in recorded["files"]
        ]
    expected = case["expected"]
    if expected["sha"]:
        [culprit] = [c for c in commits if c.sha == expected["sha"]]
        assert culprit.pr == expected["pr"]
