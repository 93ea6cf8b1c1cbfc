"""A push to a registered backend's repository makes runs; each run's end is a commit
status on the vendor's pushed commit, in the vendor's repository, against the fake GitHub
(issue #30). A GitHub outage delays the status; upstream-triggered and CLI runs post none."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Engine, select
from sqlalchemy.orm import sessionmaker

from service.config import Settings
from service.db import session_scope
from service.domain.states import StepStatus
from service.github.client import GitHubClient
from service.github.retry import Backoff
from service.github.vendor_status import drain
from service.models import OutboxKind, OutboxMessage, utcnow
from tests.support.factories import make_backend, make_finished_run
from tests.support.fake_github import FakeGitHub
from workers.pipeline.steps.outcome import StepOutcome
from workers.pipeline.testrun.records import TestRunOutcome
from workers.pipeline.verdict.collect import collect

pytest_plugins = ["tests.support.github_fixtures"]
VENDOR = "acme/torch-acme"
SHA = "ab" * 20
SETTINGS = Settings(public_url="https://ootci.example")


def pushed_run(engine: Engine, *, trigger: str = "webhook", repo: str = VENDOR) -> int:
    with session_scope(engine) as s:
        backend = make_backend(s, f"acme-{trigger}-{repo.replace('/', '-')}")
        run = make_finished_run(s, backend, sha=SHA)
        run.trigger = trigger
        run.trigger_info = {"event": "push", "repo": repo, "ref": "refs/heads/main", "sha": SHA}
        tests = TestRunOutcome(StepOutcome(StepStatus.PASSED, 0), ())
        run.transition(collect(s, run, StepOutcome(StepStatus.PASSED, 0), tests, SETTINGS,
                               lambda _t: None))
        return run.id


def test_a_push_triggered_run_posts_its_status_on_the_vendor_commit(
    engine: Engine, fake_github: FakeGitHub,
) -> None:
    fake_github.add_commit(VENDOR, {"sha": SHA, "parents": []})
    run_id = pushed_run(engine)
    pushed_run(engine, trigger="cli")  # not a push: no status
    pushed_run(engine, repo="pytorch/pytorch")  # upstream's push: not the vendor's commit
    client = GitHubClient(fake_github.url, fake_github.token, "pytorch/pytorch",
                          write_interval_s=0, sleep=lambda _s: None,
                          backoff=Backoff(max_retries=0))
    fake_github.fail_with_5xx(times=1)
    sessions = sessionmaker(engine)
    down = drain(sessions, client, can_write=True)
    assert (down.sent, down.retried) == (0, 1)
    assert fake_github.statuses(VENDOR, SHA) == []
    up = drain(sessions, client, can_write=True, now=utcnow() + dt.timedelta(minutes=2))
    assert up.sent == 1
    (status,) = fake_github.statuses(VENDOR, SHA)
    assert status["state"] == "success" and status["context"] == "ootci/nightly"
    assert status["target_url"] == f"https://ootci.example/runs/{run_id}"
    with session_scope(engine) as s:
        kinds = [m.kind for m in s.scalars(select(OutboxMessage))]
        assert kinds.count(OutboxKind.VENDOR_STATUS) == 1
