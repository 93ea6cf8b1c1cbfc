"""Conformance results on a real database (SQLite and Postgres): stored per mechanism,
the `conformance` object of GET /api/runs/{id}, the previous run's working mechanisms, and
the conformance pages."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import Engine

from service.api.app import create_app
from service.commands.conformance import MechanismCounts, record_conformance
from service.config import Settings
from service.db import session_scope
from service.documents import run_detail
from service.models import Run, RunState
from service.queries.conformance import latest_per_backend, mechanism_history, previously_working
from tests.support.factories import make_backend, make_finished_run
from tests.support.helpers import RecordingDispatcher

STREAMS_FAIL = "ootci_conformance/suite/test_streams.py::test_wait_stream_orders_work"
FIRST = [
    MechanismCounts("device", "required", 9, 0, 0, ()),
    MechanismCounts("streams", "recommended", 4, 1, 0, (STREAMS_FAIL,)),
    MechanismCounts("distributed", "optional", 0, 2, 0, ("a::x", "a::y")),
    MechanismCounts("guard", "required", 2, 0, 3, ()),
]


def _client(engine: Engine, tmp_path: Path) -> TestClient:
    settings = Settings(home=tmp_path / "home", database_url=str(engine.url))
    return TestClient(create_app(settings, dispatcher=RecordingDispatcher(), engine=engine))


def _seed(engine: Engine) -> tuple[int, int, int]:
    """feas: two runs (streams breaks in the second), tiny: one run without results."""
    with session_scope(engine) as s:
        feas, tiny = make_backend(s, "feas"), make_backend(s, "tiny")
        first = make_finished_run(s, feas, spec="pip:torch==2.13.0")
        record_conformance(s, first.id, "feas", FIRST)
        second = make_finished_run(s, feas, spec="pip:torch==2.14.1")
        record_conformance(s, second.id, "feas", [
            MechanismCounts("device", "required", 8, 1, 0, ("d::broke",)),
            MechanismCounts("streams", "recommended", 5, 0, 0, ()),
        ])
        plain = make_finished_run(s, tiny)
        for run in (first, second, plain):
            run.transition(RunState.PASSED)
        return first.id, second.id, plain.id


def test_results_are_stored_and_shaped_per_mechanism(engine: Engine, tmp_path: Path) -> None:
    first, second, plain = _seed(engine)
    with session_scope(engine) as s:
        detail = run_detail(s, first)
        assert detail is not None and detail.conformance is not None
        assert detail.conformance.device == "feas"
        assert list(detail.conformance.mechanisms) == ["device", "streams", "distributed", "guard"]
        assert detail.conformance.mechanisms["streams"].model_dump() == {
            "level": "recommended", "passed": 4, "failed": 1, "skipped": 0,
            "failing": [STREAMS_FAIL],
        }
        no_suite = run_detail(s, plain)
        assert no_suite is not None and no_suite.conformance is None

    body = _client(engine, tmp_path).get(f"/api/runs/{first}").json()
    assert body["conformance"]["mechanisms"]["guard"] == {
        "level": "required", "passed": 2, "failed": 0, "skipped": 3, "failing": []}
    assert body["conformance"]["mechanisms"]["distributed"]["failing"] == ["a::x", "a::y"]
    assert _client(engine, tmp_path).get(f"/api/runs/{plain}").json()["conformance"] is None


def test_api_matrix_is_each_backends_latest_run(engine: Engine, tmp_path: Path) -> None:
    _, second, _ = _seed(engine)
    body = _client(engine, tmp_path).get("/api/conformance").json()
    assert [b["backend"] for b in body["backends"]] == ["feas"]
    feas = body["backends"][0]
    assert (feas["run_id"], feas["device"]) == (second, "feas")
    assert feas["mechanisms"]["device"] == {
        "level": "required", "passed": 8, "failed": 1, "skipped": 0, "failing": ["d::broke"]}


def test_recording_again_replaces_the_runs_results(engine: Engine) -> None:
    first, _, _ = _seed(engine)
    with session_scope(engine) as s:
        record_conformance(s, first, "feas", FIRST[:1])
    with session_scope(engine) as s:
        detail = run_detail(s, first)
        assert detail is not None and detail.conformance is not None
        assert list(detail.conformance.mechanisms) == ["device"]


def test_previously_working_is_the_backends_latest_earlier_run(engine: Engine) -> None:
    first, second, _ = _seed(engine)
    with session_scope(engine) as s:
        # Before its first run nothing worked; the first run's device and guard worked
        # (streams had a failure, distributed no pass).
        assert previously_working(s, s.get_one(Run, first)) == set()
        assert previously_working(s, s.get_one(Run, second)) == {"device", "guard"}


def test_matrix_and_history_queries(engine: Engine) -> None:
    first, second, _ = _seed(engine)
    with session_scope(engine) as s:
        latest = latest_per_backend(s)
        assert [(b.backend, b.run_id) for b in latest] == [("feas", second)]
        assert latest[0].results["device"].failing == ["d::broke"]
        history = mechanism_history(s, "streams")
        assert [(h.run_id, h.result.failed) for h in history] == [(second, 0), (first, 1)]


def test_pages_show_status_words_and_failing_tests(engine: Engine, tmp_path: Path) -> None:
    first, second, _ = _seed(engine)
    client = _client(engine, tmp_path)
    page = client.get("/conformance")
    assert page.status_code == 200
    html = page.text
    # feas's latest run: device has 8 passes and a failure (partial), streams works.
    assert 'data-mechanism="device" data-status="partial"' in html
    assert 'data-mechanism="streams" data-status="works"' in html
    assert "◐ partial" in html and "✓ works" in html
    assert "/conformance/device?backend=feas" in html
    history = client.get("/conformance/device", params={"backend": "feas"})
    assert history.status_code == 200
    assert "d::broke" in history.text  # the failing test, one click from the matrix
    assert f'data-run="{first}"' in history.text and f'data-run="{second}"' in history.text
    assert client.get("/conformance/streams", params={"backend": "tiny"}).status_code == 200
    assert client.get("/conformance/Not-A-Name").status_code == 422
