"""Honest PR runs, end to end: a signed webhook, the real pipeline on the PR's own wheel
(served over loopback HTTP), and the verdict sent through the outbox to the fake GitHub
as a commit status on the PR's head sha. A PR whose wheel never comes waits, expires, and
is never tested against another torch."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from service.api.app import create_app
from service.commands.runs import get_or_create_backend
from service.config import Settings
from service.db import session_scope
from service.github.client import GitHubClient
from service.github.reporter import ReportSettings, drain
from service.models import Run, Step, TorchBuild
from tests.support import paths as support_paths
from tests.support.fake_github import FakeGitHub
from tests.support.fake_torch import build_wheel
from tests.support.file_server import LOOPBACK_WHEELS, serve_directory
from tests.support.pyonly import write_pyonly_backend
from workers.jobs.pr_wait import check_waiting, is_published
from workers.pipeline.execute import execute_run

pytest_plugins = ["tests.support.github_fixtures"]

SECRET = "pr-runs-secret"
REPO = "pytorch/pytorch"
PR, HEAD = 165432, "3f1c2a9d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39"
PR_VERSION = "2.14.0.dev20261126+pr165432"
SUITE = f"""\
import torch

def test_the_prs_torch():
    assert torch.version.git_version == "{HEAD}"
"""


@pytest.fixture
def pr_builds(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """Where upstream publishes PR wheels: an empty directory served on loopback."""
    root = tmp_path / "pr-builds"
    root.mkdir()
    with serve_directory(root) as url:
        yield root, url


def publish_pr_wheel(root: Path) -> Path:
    """The PR's torch, built from its head sha, where the template says it goes."""
    target = root / str(PR) / HEAD
    wheel = build_wheel(target, PR_VERSION, HEAD, {})
    # The index-free URL the template names: no local-version "+" in it.
    return wheel.rename(target / "torch-2.14.0-py3-none-any.whl")


class Recorder:
    def __init__(self) -> None:
        self.enqueued: list[int] = []

    def enqueue_run(self, run_id: int) -> None:
        self.enqueued.append(run_id)

    def check(self) -> None:
        return None

    def close(self) -> None:
        return None


@pytest.fixture
def settings(tmp_path: Path, engine: Engine, pr_builds: tuple[Path, str]) -> Settings:
    return Settings(
        home=tmp_path / "home",
        database_url=str(engine.url),
        webhook_secret=SECRET,
        pr_wheel_url_template=pr_builds[1] + "/{pr}/{sha}/torch-2.14.0-py3-none-any.whl",
        pr_wheel_wait_s=3600,
        public_url="https://ootci.example.org",
        # The relay that forwards upstream's events (the fixture's repository).
        relay_repositories=["acme/torch-acme"],
        **LOOPBACK_WHEELS,
    )


@pytest.fixture
def backend(tmp_path: Path, engine: Engine) -> Path:
    source = write_pyonly_backend(tmp_path / "pyonly", {"test_pr.py": SUITE})
    with session_scope(engine) as s:
        get_or_create_backend(s, "pyonly", str(source))
    return source


def labelled(wheel_url: str | None = None) -> bytes:
    """The relayed pull_request labeled event, with the relay's wheel_url if given."""
    payload = json.loads((support_paths.FIXTURES / "webhooks" / "repository_dispatch_pull_request.json").read_text())
    if wheel_url:
        payload["client_payload"]["wheel_url"] = wheel_url
    return json.dumps(payload).encode()


def deliver(client: TestClient, body: bytes) -> dict[str, Any]:
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    resp = client.post("/webhooks/github", content=body, headers={
        "Content-Type": "application/json", "X-GitHub-Event": "repository_dispatch",
        "X-GitHub-Delivery": str(uuid.uuid4()), "X-Hub-Signature-256": signature,
    })
    assert resp.status_code == 202, resp.text
    return dict(resp.json())


def send_statuses(engine: Engine, fake: FakeGitHub) -> None:
    github = GitHubClient(fake.url, fake.token, REPO, write_interval_s=0, sleep=lambda s: None)
    cfg = ReportSettings(repo=REPO, label="x", min_score=0.5, public_url="https://ootci.example.org",
                         unlabel_on_fix=False, can_write=True)
    result = drain(sessionmaker(engine), github, cfg)
    assert not result.errors, result.errors


@pytest.fixture
def github(fake_github: FakeGitHub) -> FakeGitHub:
    """The fake GitHub, knowing the PR's head commit (statuses go on existing commits)."""
    fake_github.add_commit(REPO, {"sha": HEAD, "parents": []})
    return fake_github


def latest_status(fake: FakeGitHub) -> dict[str, Any]:
    statuses = [s for s in fake.statuses(REPO, HEAD) if s["context"] == "ootci/pyonly"]
    assert statuses, fake.statuses(REPO, HEAD)
    return dict(statuses[-1])


def test_a_labelled_pr_waits_for_its_own_wheel_then_is_tested_on_it_and_gets_a_status(
    engine: Engine, settings: Settings, backend: Path, pr_builds: tuple[Path, str],
    github: FakeGitHub,
) -> None:
    fake_github = github
    recorder = Recorder()
    with TestClient(create_app(settings, dispatcher=recorder, engine=engine)) as client:
        answer = deliver(client, labelled())
        (run_id,) = answer["run_ids"]
        # The same label again (or a synchronize at this sha): nothing new.
        again = deliver(client, labelled())
        assert again["status"] == "recorded" and again["run_ids"] == []
        assert "already has its run" in again["reason"]
        page = client.get(f"/runs/{run_id}")
        assert page.status_code == 200 and "waiting for upstream build" in page.text

    # Not published yet: still waiting, a pending status on the head.
    check = check_waiting(engine, settings)
    assert check.still_waiting == [run_id] and check.released == []
    send_statuses(engine, fake_github)
    assert latest_status(fake_github)["state"] == "pending"
    assert execute_run(engine, settings, run_id, "w1") is None  # a waiting run is not claimable

    publish_pr_wheel(pr_builds[0])
    assert check_waiting(engine, settings).released == [run_id]
    assert execute_run(engine, settings, run_id, "w1") == "passed"
    with Session(engine) as s:
        run = s.get_one(Run, run_id)
        assert run.torch_build is not None
        assert (run.torch_build.version, run.torch_build.git_version) == (PR_VERSION, HEAD)
    check_waiting(engine, settings)  # owes the verdict
    send_statuses(engine, fake_github)
    status = latest_status(fake_github)
    assert status["state"] == "success"
    assert PR_VERSION in status["description"]
    assert status["target_url"] == f"https://ootci.example.org/runs/{run_id}"


def test_a_pr_whose_wheel_never_comes_expires_untested(
    engine: Engine, settings: Settings, backend: Path, github: FakeGitHub
) -> None:
    fake_github = github
    with TestClient(create_app(settings, dispatcher=Recorder(), engine=engine)) as client:
        (run_id,) = deliver(client, labelled())["run_ids"]
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=settings.pr_wheel_wait_s + 1)
    check = check_waiting(engine, settings, now=later)
    assert check.expired == [run_id]
    with Session(engine) as s:
        run = s.get_one(Run, run_id)
        assert run.state == "errored" and run.error is not None
        assert run.error.startswith(f"expired: waiting for upstream build of PR #{PR}")
        # Nothing was provisioned or tested under the PR's name.
        assert run.torch_build_id is None
        assert s.scalars(select(Step).where(Step.run_id == run_id)).all() == []
        assert s.scalars(select(TorchBuild)).all() == []
    send_statuses(engine, fake_github)
    status = latest_status(fake_github)
    assert status["state"] == "error" and "expired" in status["description"]


def test_a_relayed_wheel_url_is_queued_at_once_and_a_404_errors_without_another_torch(
    engine: Engine, settings: Settings, backend: Path, pr_builds: tuple[Path, str]
) -> None:
    missing = pr_builds[1] + "/nowhere/torch-2.14.0-py3-none-any.whl"
    assert not is_published(missing)
    recorder = Recorder()
    with TestClient(create_app(settings, dispatcher=recorder, engine=engine)) as client:
        (run_id,) = deliver(client, labelled(missing))["run_ids"]
    assert recorder.enqueued == [run_id]
    assert execute_run(engine, settings, run_id, "w1") == "errored"
    with Session(engine) as s:
        run = s.get_one(Run, run_id)
        assert run.torch_spec == f"wheel:{missing}"
        assert run.error is not None and "HTTP 404" in run.error
        assert run.torch_build_id is None


def test_without_a_wheel_source_nothing_is_queued(
    engine: Engine, tmp_path: Path, backend: Path
) -> None:
    bare = Settings(home=tmp_path / "bare", database_url=str(engine.url), webhook_secret=SECRET,
                    relay_repositories=["acme/torch-acme"])
    with TestClient(create_app(bare, dispatcher=Recorder(), engine=engine)) as client:
        answer = deliver(client, labelled())
    assert answer["status"] == "recorded" and answer["run_ids"] == []
    assert "only tested against its own torch" in answer["reason"]
