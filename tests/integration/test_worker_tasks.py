"""Task bodies over a real database: the nightly plan's natural key, reruns, the pin
report and the stale-run sweep; and the beat schedule built from settings."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery.schedules import crontab
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from service.commands.backends import add_backend, register_backend
from service.commands.runs import create_run, get_or_create_backend, plan_rerun, stale_run_ids
from service.config import Settings
from service.db import session_scope
from service.domain.targets import nightly_targets
from service.models import Run, RunState, SourceKind, TestResult, TorchBuild
from service.queries.pins import newest_green_builds
from tests.support import redis_dbs
from tests.support.gates import gate_fixture  # noqa: F401 (the `gate` fixture)
from tests.support.pyonly import write_pyonly_backend
from workers.jobs.nightly import plan_nightly
from workers.pipeline.execute import execute_run
from workers.schedule import SWEEP_EVERY_S, beat_schedule, cron

NIGHT = dt.date(2026, 11, 26)
PINS = ["pip:torch==2.13.0", "pip:torch==2.14.1"]


@pytest.fixture
def backends(engine: Engine) -> None:
    with session_scope(engine) as s:
        add_backend(s, "torch_openreg", "/srv/openreg", changed_by="test")
        add_backend(s, "acme", "/srv/acme", changed_by="test")
        # An `ootci run --backend DIR` experiment and a corpus backend: never the nightly's.
        register_backend(s, "experiment", "/home/alice/scratch", changed_by="test")
        get_or_create_backend(s, "acme-corpus", "/srv/acme")


def test_nightly_specs_are_the_pins_plus_nightly_once() -> None:
    assert nightly_targets(PINS) == [*PINS, "nightly"]
    assert nightly_targets(["nightly", "pip:torch==2.13.0"]) == ["nightly", "pip:torch==2.13.0"]


def test_nightly_plan_creates_backend_x_targets_once_per_night(
    engine: Engine, backends: None
) -> None:
    with session_scope(engine) as s:
        first = plan_nightly(s, PINS, NIGHT)
    assert len(first) == 2 * 3
    with session_scope(engine) as s:
        assert plan_nightly(s, PINS, NIGHT) == []  # the task delivered twice adds nothing
        runs = s.scalars(select(Run).where(Run.id.in_(first))).all()
        assert {(r.trigger, r.state) for r in runs} == {("nightly", "queued")}
        assert {r.trigger_info["night"] for r in runs} == {"2026-11-26"}
        assert sorted({r.torch_spec for r in runs}) == sorted([*PINS, "nightly"])
    with session_scope(engine) as s:
        # A pin added during the day is planned for the same night; the rest is not repeated.
        added = plan_nightly(s, [*PINS, "pip:torch==2.12.0"], NIGHT)
        assert len(added) == 2
        # The next night is a new natural key.
        assert len(plan_nightly(s, PINS, NIGHT + dt.timedelta(days=1))) == 6


def test_a_night_planned_days_late_still_sees_its_runs(engine: Engine, backends: None) -> None:
    # A beat catching up, or a task redelivered after an outage, plans an old night now.
    late = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=9)
    with session_scope(engine) as s:
        assert len(plan_nightly(s, PINS, late)) == 6
    with session_scope(engine) as s:
        assert plan_nightly(s, PINS, late) == []


def test_rerun_creates_one_pending_run_with_the_failed_tests(
    engine: Engine, backends: None
) -> None:
    with session_scope(engine) as s:
        backend = get_or_create_backend(s, "acme", "/srv/acme")
        old = create_run(s, backend, "pip:torch==2.14.1", trigger="nightly")
        old.state = RunState.FAILED
        s.add_all(
            [
                TestResult(
                    run_id=old.id,
                    nodeid="tests/test_a.py::test_ok",
                    suite="test_a",
                    outcome="passed",
                ),
                TestResult(
                    run_id=old.id,
                    nodeid="tests/test_a.py::test_bad",
                    suite="test_a",
                    outcome="failed",
                ),
                TestResult(
                    run_id=old.id,
                    nodeid="tests/test_b.py::test_boom",
                    suite="test_b",
                    outcome="crashed",
                ),
                # Pytest died at exit: no single test to repeat.
                TestResult(
                    run_id=old.id, nodeid="<session exit>", suite="<session exit>",
                    outcome="crashed",
                ),
            ]
        )
        unfinished = create_run(s, backend, "nightly", trigger="nightly")
        old_id, unfinished_id = old.id, unfinished.id
    with session_scope(engine) as s:
        new_id = plan_rerun(s, old_id)
        assert plan_rerun(s, unfinished_id) is None
        assert plan_rerun(s, 999_999) is None
    assert new_id is not None
    with session_scope(engine) as s:
        assert plan_rerun(s, old_id) == new_id  # asking again while it is pending
        new = s.get_one(Run, new_id)
        assert (new.trigger, new.state, new.torch_spec) == ("rerun", "queued", "pip:torch==2.14.1")
        assert new.trigger_info["rerun_of"] == old_id
        assert sorted(new.trigger_info["failed_tests"]) == [
            "tests/test_a.py::test_bad",
            "tests/test_b.py::test_boom",
        ]


def test_a_rerun_runs_only_the_failed_tests(engine: Engine, tmp_path: Path, gate: Path) -> None:
    suite = (
        "import os\n"
        "def test_ok():\n    pass\n"
        "def test_other_ok():\n    pass\n"
        "def test_fixed_later():\n    assert os.path.exists(os.environ['FIXED_MARK'])\n"
    )
    source = write_pyonly_backend(tmp_path / "pyonly", {"test_suite.py": suite})
    # The operator lets FIXED_MARK through to builds and tests (nothing else gets there).
    settings = Settings(
        home=tmp_path / "home", database_url=str(engine.url), child_env_passthrough=["FIXED_MARK"]
    )
    with session_scope(engine) as s:
        first_id = create_run(
            s, get_or_create_backend(s, "pyonly", str(source)), "installed", trigger="nightly"
        ).id
    mark = gate  # where the sealed tests see it
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FIXED_MARK", str(mark))
        assert execute_run(engine, settings, first_id, "w") == RunState.FAILED
        with session_scope(engine) as s:
            rerun_id = plan_rerun(s, first_id)
        assert rerun_id is not None
        mark.touch()
        assert execute_run(engine, settings, rerun_id, "w") == RunState.PASSED
    with Session(engine) as s:
        results = s.scalars(select(TestResult).where(TestResult.run_id == rerun_id)).all()
        assert [(r.nodeid, r.outcome) for r in results] == [
            ("tests/test_suite.py::test_fixed_later", "passed")]


def test_pin_report_picks_the_newest_green_build_per_backend(
    engine: Engine, backends: None
) -> None:
    t0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    with session_scope(engine) as s:
        backend = get_or_create_backend(s, "acme", "/srv/acme")
        builds = []
        for i, version in enumerate(["2.13.0", "2.14.1", "2.15.0.dev20261125"]):
            tb = TorchBuild(
                spec=f"pip:torch=={version}",
                source_kind=SourceKind.PIP,
                version=version,
                git_version=f"{i:040d}",
                created_at=t0 + dt.timedelta(days=i),
            )
            s.add(tb)
            builds.append(tb)
        s.flush()
        for tb, state in zip(
            builds, [RunState.PASSED, RunState.PASSED, RunState.FAILED], strict=True
        ):
            run = create_run(s, backend, tb.spec, trigger="nightly")
            run.torch_build_id, run.state = tb.id, state
    with Session(engine) as s:
        report = {g.backend: g.version for g in newest_green_builds(s)}
    assert report == {"acme": "2.14.1"}


def test_sweep_finds_lost_queued_and_dead_leased_runs(engine: Engine, backends: None) -> None:
    now = dt.datetime.now(dt.UTC)
    with session_scope(engine) as s:
        backend = get_or_create_backend(s, "acme", "/srv/acme")
        fresh = create_run(s, backend, "nightly", trigger="api")
        lost = create_run(s, backend, "nightly", trigger="api")
        lost.created_at = now - dt.timedelta(hours=2)
        dead = create_run(s, backend, "nightly", trigger="api")
        dead.state, dead.lease_expires_at = RunState.RUNNING, now - dt.timedelta(seconds=1)
        alive = create_run(s, backend, "nightly", trigger="api")
        alive.state, alive.lease_expires_at = RunState.RUNNING, now + dt.timedelta(hours=1)
        ids = (fresh.id, lost.id, dead.id, alive.id)
    with Session(engine) as s:
        stale = set(stale_run_ids(s, queued_older_than_s=1800))
    assert stale == {ids[1], ids[2]}
    with Session(engine) as s:
        assert s.scalar(select(func.count(Run.id))) == 4


def test_beat_schedule_comes_from_settings_and_every_entry_expires() -> None:
    settings = Settings(nightly_cron="30 2 * * *", weekly_cron="0 7 * * 1")
    schedule = beat_schedule(settings)
    assert {e["task"] for e in schedule.values()} == {
        "ootci.nightly.schedule",
        "ootci.weekly.pin_reports",
        "ootci.sweep.stale",
        "ootci.pr.check_waiting",
        "ootci.github.drain_outbox",
        "ootci.bisect.advance",
        "ootci.notify.drain",
    }
    nightly = schedule["nightly-matrix"]["schedule"]
    assert isinstance(nightly, crontab)
    assert nightly.minute == {30} and nightly.hour == {2}
    weekly = schedule["weekly-pin-report"]["schedule"]
    assert weekly.day_of_week == {1} and weekly.hour == {7}
    assert schedule["sweep-stale-runs"]["schedule"] == SWEEP_EVERY_S
    assert all(entry["options"]["expires"] > 0 for entry in schedule.values())
    assert cron("*/15 * * * *").minute == {0, 15, 30, 45}


def test_celery_app_is_configured_for_at_least_once_delivery() -> None:
    from workers.celery_app import app, celery_config

    conf = celery_config(Settings(broker_url=redis_dbs.url(redis_dbs.WORKER_TASKS), run_lease_s=900))
    assert conf["task_acks_late"] and conf["task_reject_on_worker_lost"]
    assert conf["worker_prefetch_multiplier"] == 1
    assert conf["accept_content"] == ["json"]
    assert conf["broker_transport_options"]["visibility_timeout"] == 900
    limits = conf["task_annotations"]["ootci.run.execute"]
    assert 0 < limits["soft_time_limit"] < limits["time_limit"]
    app.loader.import_default_modules()  # what a worker process registers at start
    assert {
        "ootci.run.execute",
        "ootci.nightly.schedule",
        "ootci.weekly.pin_reports",
        "ootci.classify.rerun",
        "ootci.sweep.stale",
        "ootci.pr.check_waiting",
        "ootci.github.drain_outbox",
        "ootci.bisect.advance",
        "ootci.notify.drain",
    } <= set(app.tasks)


@pytest.fixture
def task_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Tasks read settings from the environment, like a worker process does."""
    from service.config import get_settings

    monkeypatch.setenv("OOTCI_HOME", str(tmp_path))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_execute_task_skips_a_finished_run(
    engine: Engine, db_url: str, backends: None, task_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workers.tasks import execute

    monkeypatch.setenv("OOTCI_DATABASE_URL", db_url)
    with session_scope(engine) as s:
        run = create_run(
            s, get_or_create_backend(s, "acme", "/srv/acme"), "installed", trigger="api"
        )
        run.state = RunState.PASSED
        run_id = run.id
    result = execute.apply(args=[run_id])
    assert result.state == "SUCCESS" and result.result is None
    with Session(engine) as s:
        assert s.get_one(Run, run_id).attempts == 0  # never claimed


def test_execute_task_retries_when_the_database_is_unreachable(
    task_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from celery.signals import task_retry

    from workers.tasks import MAX_DB_RETRIES, execute

    monkeypatch.setenv("OOTCI_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:1/none")
    retries: list[object] = []

    def on_retry(**kwargs: object) -> None:
        retries.append(kwargs["reason"])

    task_retry.connect(on_retry, weak=False)
    try:
        result = execute.apply(args=[1])  # eager: the retries run at once, no backoff wait
    finally:
        task_retry.disconnect(on_retry)
    assert result.state == "FAILURE"
    assert "connection" in str(result.result).lower()
    assert len(retries) == MAX_DB_RETRIES
