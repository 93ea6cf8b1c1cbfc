"""A breakage's bisection as the API and its page show it while it runs, and no
bisection at all for a breakage that needed none."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.api.app import create_app
from service.config import Settings
from service.models import Bisection, BisectionProbe, RunState
from tests.support.factories import make_backend, make_breakage, make_run, make_torch_build
from tests.support.helpers import RecordingDispatcher


@pytest.fixture
def client(engine: Engine, tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(home=tmp_path)
    with TestClient(create_app(settings, dispatcher=RecordingDispatcher(), engine=engine)) as c:
        yield c


def _running(engine: Engine) -> tuple[int, int, int]:
    """A bisection of nights 1..5 whose first probe (night 3) runs; (breakage, probe run,
    a breakage without bisection)."""
    with Session(engine) as s:
        backend = make_backend(s)
        runs = []
        for day, state in ((1, RunState.PASSED), (5, RunState.FAILED)):
            build = make_torch_build(s, f"{day}" * 40, version=f"2.14.0.dev2026110{day}+cpu")
            runs.append(make_run(s, backend, torch_build_id=build.id, state=state))
        breakage = make_breakage(s, backend, runs[1])
        plain = make_breakage(s, backend, fingerprint="other")
        bisection = Bisection(
            breakage_id=breakage.id, backend_id=backend.id, head_run_id=runs[1].id,
            base_run_id=runs[0].id, base_version="2.14.0.dev20261101+cpu",
            head_version="2.14.0.dev20261105+cpu", state="running", good_run_id=runs[0].id,
            bad_run_id=runs[1].id)
        s.add(bisection)
        s.flush()
        probe = make_run(s, backend, spec="nightly:2026-11-03", trigger="bisect",
                         state=RunState.RUNNING)
        s.add_all([
            BisectionProbe(bisection_id=bisection.id, night=dt.date(2026, 11, 3),
                           spec="nightly:2026-11-03", run_id=probe.id, result="pending"),
            BisectionProbe(bisection_id=bisection.id, night=dt.date(2026, 11, 4),
                           spec="nightly:2026-11-04", run_id=None, result="skipped",
                           note="not on the nightly index"),
        ])
        s.commit()
        return breakage.id, probe.id, plain.id


def test_a_running_bisection_shows_its_probes_and_the_range_so_far(
    client: TestClient, engine: Engine
) -> None:
    breakage_id, probe_id, plain_id = _running(engine)
    doc = client.get(f"/api/breakages/{breakage_id}").json()["bisection"]
    assert doc["state"] == "running"
    assert [(p["spec"], p["run_id"], p["run_state"], p["result"]) for p in doc["probes"]] == [
        ("nightly:2026-11-03", probe_id, "running", "pending"),
        ("nightly:2026-11-04", None, None, "skipped"),
    ]
    assert (doc["narrowed_to"]["good"], doc["narrowed_to"]["bad"]) == (
        "2.14.0.dev20261101+cpu", "2.14.0.dev20261105+cpu")
    assert client.get(f"/api/breakages/{plain_id}").json()["bisection"] is None

    page = client.get(f"/breakages/{breakage_id}").text
    assert 'id="probes"' in page and f"/runs/{probe_id}/steps/test/log" in page
    assert "not on the nightly index" in page and "so far" in page
    assert 'id="bisection"' not in client.get(f"/breakages/{plain_id}").text
