"""A PR run's commit status, as the fake GitHub receives it: its link is built only from
OOTCI_PUBLIC_URL (none when unset, whatever the queued message held) and its description
carries no worker path or internal host. A PR comment links only there too."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import sessionmaker

from service.commands import outbox
from service.commands.pr_runs import enqueue_pr_statuses
from service.commands.runs import create_run, get_or_create_backend
from service.db import session_scope
from service.github.client import GitHubClient
from service.github.reporter import ReportSettings, drain
from service.models import OutboxKind, Run, RunState
from tests.support.fake_github import FakeGitHub

pytest_plugins = ["tests.support.github_fixtures"]

REPO = "pytorch/pytorch"
PUBLIC = "https://ootci.example.org"
LEAKY = ("wheel http://10.0.3.4:8080/165/torch-2.14.0-py3-none-any.whl: no wheel file at "
         "/var/lib/ootci/work/run-9/cache/wheels/ab12/torch-2.14.0-py3-none-any.whl")


@pytest.fixture
def head(fake_github: FakeGitHub) -> Iterator[str]:
    yield fake_github.add_commit(REPO, {"sha": "a" * 40, "parents": []})


def _errored_pr_run(engine: Engine, sha: str) -> int:
    with session_scope(engine) as s:
        backend = get_or_create_backend(s, "acme", "/srv/acme")
        run = create_run(s, backend, "wheel:https://download.pytorch.org/t.whl", trigger="webhook",
                         trigger_info={"pr": 165, "sha": sha}, dedupe_key=f"pr:165:{sha}:1")
        run.transition(RunState.RUNNING)
        run.transition(RunState.ERRORED)
        run.error = LEAKY
        return run.id


def _send(engine: Engine, fake: FakeGitHub, public_url: str) -> dict[str, object]:
    github = GitHubClient(fake.url, fake.token, REPO, write_interval_s=0, sleep=lambda s: None)
    cfg = ReportSettings(repo=REPO, label="x", min_score=0.5, public_url=public_url,
                         unlabel_on_fix=False, can_write=True)
    assert not drain(sessionmaker(engine), github, cfg).errors
    return dict(fake.statuses(REPO, "a" * 40)[-1])


def test_the_status_links_to_the_public_url_and_hides_paths_and_hosts(
    engine: Engine, fake_github: FakeGitHub, head: str
) -> None:
    run_id = _errored_pr_run(engine, head)
    with session_scope(engine) as s:
        assert enqueue_pr_statuses(s, public_url=PUBLIC) == 1
    status = _send(engine, fake_github, PUBLIC)
    assert status["target_url"] == f"{PUBLIC}/runs/{run_id}"
    description = str(status["description"])
    assert "10.0.3.4" not in description and "/var/lib" not in description
    assert "<internal>" in description and ".../torch-2.14.0-py3-none-any.whl" in description


def test_without_a_public_url_a_status_has_no_link_whatever_was_queued(
    engine: Engine, fake_github: FakeGitHub, head: str
) -> None:
    run_id = _errored_pr_run(engine, head)
    with session_scope(engine) as s:
        # A message queued by an older ootci, with an internal link and a raw description.
        outbox.enqueue(s, kind=OutboxKind.STATUS, target=f"{head}:ootci/acme",
                       dedupe_key=f"status:run:{run_id}:errored", payload={
                           "sha": head, "state": "error", "context": "ootci/acme",
                           "description": LEAKY, "run_id": run_id,
                           "target_url": f"http://10.0.0.3:8000/runs/{run_id}"})
    status = _send(engine, fake_github, "")
    assert status.get("target_url") in (None, "")
    assert "10.0.3.4" not in str(status["description"]) and "/var/lib" not in str(status["description"])
    with session_scope(engine) as s:
        assert s.get_one(Run, run_id).error == LEAKY  # the run's own page keeps the whole text
