"""The weekly pin-bump loop on a seeded history (SQLite and Postgres): a bump and a hold
with their reasons, only nightly/pin-track runs as evidence, `ootci pins report
--markdown`, /pins with four weeks of history, and the one bump PR on the vendor's
repository, opened once, updated in place next week, closed when the pin caught up."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from service.api.app import create_app
from service.cli.pins import pins_app
from service.config import Settings
from service.db import session_scope
from service.github.client import GitHubClient
from service.github.reporter import ReportSettings, drain
from service.models import Backend, PinReport, Run, RunState, TorchBuild
from tests.support.factories import make_backend, make_breakage, make_run, make_torch_build
from tests.support.fake_github import FakeGitHub
from tests.support.helpers import RecordingDispatcher
from workers.jobs.pin_reports import make_weekly_reports

pytest_plugins = ["tests.support.github_fixtures"]

VENDOR = "vendor/openreg"
PIN_FILE = ".ci/pytorch-pin.txt"
SUSPECT_PR = 165001
UTC = dt.UTC


def at(day: str) -> dt.datetime:
    return dt.datetime.fromisoformat(day).replace(hour=4, tzinfo=UTC)


def write_backend(root: Path, name: str, pin: str, *, with_repo: bool) -> Path:
    root.mkdir(parents=True)
    recipe = f'[backend]\nname = "{name}"\n[build]\ncommand = ["true"]\n[test]\ncommand = ["true"]\n'
    recipe += f'[pins]\nfile = "{PIN_FILE}"\n'
    if with_repo:  # else: reported, no bump PR
        recipe += f'repo = "{VENDOR}"\nbranch = "main"\n'
    (root / "ootci.toml").write_text(recipe)
    (root / ".ci").mkdir()
    (root / PIN_FILE).write_text(f"# the PyTorch this backend builds against\n{pin}\n")
    return root


class History:
    """Runs of the schedule (and others) on nightly torch builds, as the pipeline leaves them."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.builds: dict[str, TorchBuild] = {}

    def build(self, day: str) -> TorchBuild:
        if day not in self.builds:
            stamp = day.replace("-", "")
            self.builds[day] = make_torch_build(
                self.session, (stamp * 5)[:40], version=f"2.14.0.dev{stamp}+cpu",
                artifact_url=f"file:///idx/torch-{stamp}.whl", artifact_sha256="a" * 64,
                created_at=at(day))
        return self.builds[day]

    def run(self, backend: Backend, day: str, state: RunState, trigger: str = "nightly") -> Run:
        return make_run(self.session, backend, torch_build_id=self.build(day).id, state=state,
                        trigger=trigger, trigger_info={"night": day}, created_at=at(day),
                        finished_at=at(day))


@pytest.fixture
def seeded(engine: Engine, tmp_path: Path) -> Settings:
    """openreg: green on the 23rd (its pin is the 16th), red since the 24th; a CLI
    experiment passed on the 25th (no evidence). strict: pinned to the 18th, green there,
    red on every night since the 19th (header-moved, suspect PR #165001)."""
    openreg = write_backend(tmp_path / "openreg", "openreg", "nightly:2026-11-16", with_repo=True)
    strict = write_backend(tmp_path / "strict", "strict", "nightly:2026-11-18", with_repo=False)
    with session_scope(engine) as s:
        a = make_backend(s, "openreg", str(openreg))
        b = make_backend(s, "strict", str(strict))
        h = History(s)
        for day in ("2026-11-16", "2026-11-20", "2026-11-23"):
            h.run(a, day, RunState.PASSED)
        red = h.run(a, "2026-11-24", RunState.FAILED)
        h.run(a, "2026-11-25", RunState.PASSED, trigger="cli")  # an experiment: not evidence
        make_breakage(s, a, fingerprint="f" * 64, title="getStream const",
                      first_seen_run_id=red.id, first_seen_at=at("2026-11-24"), culprits=[])
        h.run(b, "2026-11-18", RunState.PASSED)
        first_red = h.run(b, "2026-11-19", RunState.FAILED)
        for day in ("2026-11-20", "2026-11-23", "2026-11-24"):
            h.run(b, day, RunState.FAILED)
        make_breakage(
            s, b, fingerprint="e" * 64,
            subtype="header-moved", title="c10/core/impl/DeviceGuardImplInterface.h moved",
            first_seen_run_id=first_red.id, first_seen_at=at("2026-11-19"),
            culprits=[{"pr": SUSPECT_PR, "sha": "c" * 40, "score": 0.91, "title": "Move guard headers"}],
        )
    return Settings(home=tmp_path / "home", database_url=str(engine.url), pins=["pip:torch==2.13.0"])


def reports_by_backend(engine: Engine, week: str) -> dict[str, PinReport]:
    with Session(engine) as s:
        rows = s.execute(select(PinReport, Backend.name).join(Backend)
                         .where(PinReport.week == dt.date.fromisoformat(week))).all()
        return {name: report for report, name in rows}


def test_a_bump_and_a_hold_with_their_reasons(engine: Engine, seeded: Settings) -> None:
    made = make_weekly_reports(engine, seeded, now=at("2026-11-26"))
    assert {m.backend: m.action for m in made} == {"openreg": "bump", "strict": "hold"}, made
    reports = reports_by_backend(engine, "2026-11-23")

    bump = reports["openreg"]
    # The newest green nightly-track build, as a spec that resolves to it again; the CLI
    # experiment on the 25th does not count.
    assert (bump.current_pin, bump.green_spec, bump.proposed_spec) == (
        "nightly:2026-11-16", "nightly:2026-11-23", "nightly:2026-11-23"
    )
    assert bump.reason.startswith("bump to nightly:2026-11-23 (torch 2.14.0.dev20261123+cpu")
    assert "newer builds broke: upstream/signature-changed since 2026-11-24" in bump.reason

    hold = reports["strict"]
    assert (hold.action, hold.proposed_spec, hold.green_spec) == ("hold", None, "nightly:2026-11-18")
    assert re.fullmatch(
        rf"hold: upstream/header-moved since 2026-11-19 \(breakage \d+\), suspect #{SUSPECT_PR} \(0\.91\)",
        hold.reason,
    ), hold.reason
    assert hold.breakages[0]["suspects"][0]["pr"] == SUSPECT_PR

    # Made again the same week: replaced, not duplicated.
    make_weekly_reports(engine, seeded, now=at("2026-11-27"))
    with Session(engine) as s:
        assert len(s.scalars(select(PinReport)).all()) == 2


def test_pins_report_markdown_and_json(engine: Engine, seeded: Settings, tmp_path: Path) -> None:
    make_weekly_reports(engine, seeded, now=at("2026-11-26"))
    env = {"OOTCI_HOME": str(tmp_path / "home"), "OOTCI_DATABASE_URL": str(engine.url),
           "OOTCI_PINS": '["pip:torch==2.13.0"]'}
    # Mounted as service/cli/app.py mounts it.
    ootci = typer.Typer()
    ootci.add_typer(pins_app, name="pins")
    ootci.command("noop")(lambda: None)
    runner = CliRunner()
    result = runner.invoke(ootci, ["pins", "report", "--markdown", "--stored"], env=env)
    assert result.exit_code == 0, result.output
    text = result.output
    assert "## openreg: week of 2026-11-23" in text
    assert "**BUMP**: bump to nightly:2026-11-23" in text
    assert "**HOLD**: hold: upstream/header-moved since 2026-11-19" in text
    assert f"#{SUSPECT_PR} (0.91)" in text
    result = runner.invoke(ootci, ["pins", "report", "--json", "--stored"], env=env)
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert {r["backend"]: r["action"] for r in document["reports"]} == {"openreg": "bump", "strict": "hold"}


def test_the_pins_page_shows_four_weeks_of_history(engine: Engine, seeded: Settings) -> None:
    for day in ("2026-10-29", "2026-11-05", "2026-11-12", "2026-11-19", "2026-11-26"):
        make_weekly_reports(engine, seeded, now=at(day))
    with TestClient(create_app(seeded, dispatcher=RecordingDispatcher(), engine=engine)) as client:
        page = client.get("/pins")
        api: list[dict[str, Any]] = client.get("/api/pins/reports").json()
    assert page.status_code == 200
    weeks = re.findall(r"Week of (\d{4}-\d{2}-\d{2})", page.text)
    assert weeks == ["2026-11-23", "2026-11-16", "2026-11-09", "2026-11-02"]  # not 10-26
    assert "bump to nightly:2026-11-23" in page.text and "header-moved" in page.text
    assert sorted({r["week"] for r in api}) == ["2026-11-02", "2026-11-09", "2026-11-16", "2026-11-23"]


def _drain(engine: Engine, fake: FakeGitHub) -> None:
    github = GitHubClient(fake.url, fake.token, "pytorch/pytorch", write_interval_s=0, sleep=lambda s: None)
    cfg = ReportSettings(repo="pytorch/pytorch", label="x", min_score=0.5, public_url="",
                         unlabel_on_fix=False, can_write=True)
    result = drain(sessionmaker(engine), github, cfg)
    assert not result.errors, result.errors


def test_one_bump_pr_opened_updated_in_place_and_closed_when_the_pin_catches_up(
    engine: Engine, seeded: Settings, fake_github: FakeGitHub
) -> None:
    fake_github.add_branch(VENDOR, "main", {PIN_FILE: "nightly:2026-11-16\n", "README.md": "openreg\n"})
    make_weekly_reports(engine, seeded, now=at("2026-11-26"))
    _drain(engine, fake_github)
    (pr,) = fake_github.pulls(VENDOR)
    assert pr["state"] == "open" and pr["title"] == "Bump the PyTorch pin to nightly:2026-11-23"
    assert fake_github.file_at(VENDOR, "ootci/pytorch-pin-bump", PIN_FILE) == "nightly:2026-11-23\n"
    assert fake_github.file_at(VENDOR, "main", PIN_FILE) == "nightly:2026-11-16\n"
    assert reports_by_backend(engine, "2026-11-23")["openreg"].bump_pr["number"] == pr["number"]

    # Next week a newer nightly is green: the same PR, updated in place.
    with session_scope(engine) as s:
        openreg = s.scalar(select(Backend).where(Backend.name == "openreg"))
        assert openreg is not None
        History(s).run(openreg, "2026-11-30", RunState.PASSED)
    make_weekly_reports(engine, seeded, now=at("2026-12-03"))
    _drain(engine, fake_github)
    (same,) = fake_github.pulls(VENDOR)
    assert same["number"] == pr["number"] and same["state"] == "open"
    assert same["title"] == "Bump the PyTorch pin to nightly:2026-11-30"
    assert fake_github.file_at(VENDOR, "ootci/pytorch-pin-bump", PIN_FILE) == "nightly:2026-11-30\n"
    answer = reports_by_backend(engine, "2026-11-30")["openreg"].bump_pr
    assert (answer["number"], answer["created"]) == (pr["number"], False)

    # The vendor merged it (the local checkout has not pulled yet): the PR is closed.
    fake_github.add_branch(VENDOR, "main", {PIN_FILE: "nightly:2026-11-30\n"})
    make_weekly_reports(engine, seeded, now=at("2026-12-10"))
    _drain(engine, fake_github)
    (closed,) = fake_github.pulls(VENDOR)
    assert closed["state"] == "closed"
    assert reports_by_backend(engine, "2026-12-07")["openreg"].bump_pr["closed"] is True
