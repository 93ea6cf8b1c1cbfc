"""The JSON API over a real database (SQLite and Postgres): runs, logs, matrix,
breakages, triggering, health and metrics."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from service.api.app import create_app
from service.commands.log_chunks import append_log_chunk
from service.commands.runs import create_run, get_or_create_backend
from service.config import Settings
from service.db import session_scope
from service.models import (
    Failure,
    Run,
    RunState,
    SourceKind,
    Step,
    StepStatus,
    TestResult,
)
from tests.support.factories import make_breakage, make_torch_build
from tests.support.helpers import RecordingDispatcher

TOKEN = "t0ken-for-tests"
T0 = dt.datetime(2026, 11, 20, 3, 0, tzinfo=dt.UTC)


@dataclass
class Seeded:
    passed: int
    failed: int
    running: int
    queued: int
    breakage: int
    running_step: int


def seed(engine: Engine, tmp_path: Path) -> Seeded:
    """Two backends, two torch builds, runs in each state, a breakage seen twice."""
    running_log = b"".join(f"[{i}/40] compiling unit{i}.cpp\n".encode() for i in range(1, 41))
    with session_scope(engine) as s:
        openreg = get_or_create_backend(s, "torch_openreg", "/srv/openreg")
        acme = get_or_create_backend(s, "acme", "/srv/acme")
        b13 = make_torch_build(
            s, "a" * 40, spec="pip:torch==2.13.0", source_kind=SourceKind.PIP, version="2.13.0",
            created_at=T0,
        )
        nightly = make_torch_build(
            s, "b" * 40, source_kind=SourceKind.NIGHTLY, version="2.15.0.dev20261120",
            created_at=T0 + dt.timedelta(hours=1),
        )

        def finished(backend, build, state, verdict=None, subtype=None, hours=0):  # type: ignore[no-untyped-def]
            run = create_run(
                s, backend, build.spec, trigger="nightly", trigger_info={"night": "2026-11-20"}
            )
            run.torch_build_id = build.id
            run.state = state
            run.created_at = T0 + dt.timedelta(hours=hours)
            run.started_at = run.created_at
            run.finished_at = run.created_at + dt.timedelta(minutes=20)
            run.verdict, run.verdict_subtype = verdict, subtype
            return run

        finished(
            openreg, b13, RunState.FAILED, "upstream", "signature-changed", hours=0
        )  # older, superseded
        passed = finished(openreg, b13, RunState.PASSED, hours=1)
        failed = finished(
            openreg, nightly, RunState.FAILED, "upstream", "signature-changed", hours=2
        )
        finished(acme, b13, RunState.PASSED, hours=3)
        s.flush()
        build_step = Step(
            run_id=failed.id,
            name="build",
            status=StepStatus.FAILED,
            duration_s=42.0,
            exit_code=1,
            started_at=T0,
            finished_at=T0,
        )
        build_step.store_log(
            b"line one\nline two\nerror: 'getStream' marked 'override', but does not override\nlast line\n"
        )
        s.add_all(
            [
                Step(run_id=failed.id, name="provision", status=StepStatus.PASSED, duration_s=3.5),
                build_step,
                Step(run_id=passed.id, name="test", status=StepStatus.PASSED, duration_s=700.0),
            ]
        )
        s.add_all(
            TestResult(
                run_id=passed.id,
                nodeid=f"tests/test_memory.py::test_{i}",
                suite="test_memory",
                outcome="passed" if i % 5 else "failed",
                duration_s=0.1,
            )
            for i in range(12)
        )
        breakage = make_breakage(
            s, openreg, failed, fingerprint="f" * 64,
            title="getStream marked override but does not override", occurrences=2,
        )
        for nodeid in ("tests/test_guard.py::test_stream", "tests/test_guard.py::test_event"):
            s.add(
                Failure(
                    run_id=failed.id,
                    step_name="build",
                    stage="build",
                    nodeid=nodeid,
                    line="error: 'getStream' marked 'override', but does not override",
                    line_no=3,
                    captures={"symbol": "getStream"},
                    category="upstream",
                    subtype="signature-changed",
                    rule="override-mismatch",
                    fingerprint="f" * 64,
                    fingerprint_version=1,
                    finding={"rule": "override-mismatch", "context": ["line two"]},
                    triage="upstream",
                    triage_reason="passes on the last green pin",
                    breakage_id=breakage.id,
                )
            )
        running = create_run(s, openreg, "pip:torch==2.14.1", trigger="api")
        running.state = RunState.RUNNING
        running.created_at = T0 + dt.timedelta(hours=4)
        s.flush()
        # A worker on another machine: its log file is not here, its streamed chunks are.
        building = Step(
            run_id=running.id,
            name="build",
            status=StepStatus.RUNNING,
            log_path="/elsewhere/runs/3/build.log",
        )
        s.add(building)
        s.flush()
        append_log_chunk(s, building.id, 0, 0, running_log[:500])
        append_log_chunk(s, building.id, 1, 500, running_log[500:])
        queued = create_run(s, acme, "nightly", trigger="webhook")
        queued.created_at = T0 + dt.timedelta(hours=5)
        s.flush()
        return Seeded(passed.id, failed.id, running.id, queued.id, breakage.id, building.id)


@pytest.fixture
def dispatcher() -> RecordingDispatcher:
    return RecordingDispatcher()


@pytest.fixture
def seeded(engine: Engine, tmp_path: Path) -> Seeded:
    return seed(engine, tmp_path)


@pytest.fixture
def client(engine: Engine, tmp_path: Path, dispatcher: RecordingDispatcher) -> Iterator[TestClient]:
    settings = Settings(home=tmp_path, api_token=TOKEN)
    with TestClient(create_app(settings, dispatcher=dispatcher, engine=engine)) as c:
        yield c


def test_list_runs_newest_first_with_total(client: TestClient, seeded: Seeded) -> None:
    body = client.get("/api/runs").json()
    assert body["total"] == 6
    ids = [r["id"] for r in body["runs"]]
    assert ids == sorted(ids, reverse=True)
    assert ids[0] == seeded.queued
    first = body["runs"][0]
    assert first["backend"] == "acme" and first["state"] == "queued"


def test_total_is_exact_below_the_cap_and_a_lower_bound_above(
    client: TestClient, engine: Engine, seeded: Seeded
) -> None:
    from service.queries.runs import RunFilters, list_runs

    body = client.get("/api/runs").json()
    assert (body["total"], body["total_capped"]) == (6, False)
    with Session(engine) as s:
        capped = list_runs(s, RunFilters(), limit=2, count_cap=4)
        exact = list_runs(s, RunFilters(state="failed"), limit=2, count_cap=4)
    assert (capped.total, capped.total_capped, len(capped.runs)) == (4, True, 2)
    assert (exact.total, exact.total_capped) == (2, False)


def test_list_runs_filters(client: TestClient, seeded: Seeded) -> None:
    def ids(**params: str) -> set[int]:
        body = client.get("/api/runs", params=params).json()
        assert body["total"] == len(body["runs"])
        return {r["id"] for r in body["runs"]}

    assert ids(state="failed") >= {seeded.failed}
    assert all(r["state"] == "failed" for r in client.get("/api/runs?state=failed").json()["runs"])
    assert ids(backend="acme") == {seeded.queued, seeded.queued - 2}
    assert ids(torch_version="2.15.0.dev20261120") == {seeded.failed}
    assert ids(torch_spec="pip:torch==2.14.1") == {seeded.running}
    assert ids(trigger="webhook") == {seeded.queued}
    assert ids(backend="nope") == set()


def test_cursor_pagination_walks_every_run_once(client: TestClient, seeded: Seeded) -> None:
    seen: list[int] = []
    cursor = None
    while True:
        params = {"limit": "3"} | ({"cursor": str(cursor)} if cursor else {})
        page = client.get("/api/runs", params=params).json()
        assert page["total"] == 6
        seen += [r["id"] for r in page["runs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 6
    offset_page = client.get("/api/runs", params={"limit": "3", "offset": "3"}).json()
    assert [r["id"] for r in offset_page["runs"]] == seen[3:6]


@pytest.mark.parametrize(
    "query",
    [
        "limit=0",
        "limit=501",
        "offset=-1",
        "state=exploded",
        "cursor=0",
        "backend=%00",
        "cursor=99999999999999",
    ],
)
def test_bad_list_params_are_422(client: TestClient, query: str) -> None:
    assert client.get(f"/api/runs?{query}").status_code == 422


def test_run_detail_has_steps_failures_and_evidence(client: TestClient, seeded: Seeded) -> None:
    body = client.get(f"/api/runs/{seeded.failed}").json()
    assert body["backend"] == "torch_openreg"
    assert body["torch_build"]["version"] == "2.15.0.dev20261120"
    assert [s["name"] for s in body["steps"]] == ["provision", "build"]
    assert body["steps"][1]["log_url"] == f"/api/runs/{seeded.failed}/steps/build/log"
    assert len(body["failures"]) == 2
    failure = body["failures"][0]
    assert failure["finding"]["rule"] == "override-mismatch"
    assert failure["triage"] == "upstream" and failure["breakage_id"] == seeded.breakage
    assert failure["captures"] == {"symbol": "getStream"}


def test_missing_run_is_404_with_reason(client: TestClient, seeded: Seeded) -> None:
    resp = client.get("/api/runs/999999")
    assert resp.status_code == 404
    assert "999999" in resp.json()["detail"]
    assert client.get("/api/runs/999999/tests").status_code == 404
    assert client.get("/api/runs/999999/steps/build/log").status_code == 404
    assert client.get("/api/runs/2147483648").status_code == 422


def test_test_results_are_paged_and_filtered(client: TestClient, seeded: Seeded) -> None:
    body = client.get(f"/api/runs/{seeded.passed}/tests", params={"limit": 5}).json()
    assert body["total"] == 12 and len(body["results"]) == 5
    failed = client.get(f"/api/runs/{seeded.passed}/tests", params={"outcome": "failed"}).json()
    assert failed["total"] == 3
    assert {r["nodeid"] for r in failed["results"]} == {
        f"tests/test_memory.py::test_{i}" for i in (0, 5, 10)
    }
    counts = client.get(f"/api/runs/{seeded.passed}").json()["test_counts"]
    assert counts == {"passed": 9, "failed": 3}


def test_finished_step_log_download_tail_and_range(client: TestClient, seeded: Seeded) -> None:
    url = f"/api/runs/{seeded.failed}/steps/build/log"
    full = client.get(url)
    assert full.status_code == 200
    assert full.content.startswith(b"line one\n") and full.content.endswith(b"last line\n")
    assert "attachment" in full.headers["content-disposition"]
    assert full.headers["x-log-complete"] == "true"
    tail = client.get(url, params={"tail": 2})
    assert (
        tail.content == b"error: 'getStream' marked 'override', but does not override\nlast line\n"
    )
    part = client.get(url, params={"offset": 5, "limit": 3})
    assert part.content == b"one"
    assert part.headers["x-log-offset"] == "5"
    assert int(part.headers["x-log-size"]) == len(full.content)
    assert client.get(url, params={"tail": 2, "offset": 1}).content == tail.content  # tail wins
    assert client.get(f"/api/runs/{seeded.failed}/steps/compile/log").status_code == 422
    missing = client.get(f"/api/runs/{seeded.failed}/steps/test/log")
    assert missing.status_code == 404 and "no test step" in missing.json()["detail"]


def test_running_step_log_is_read_from_its_streamed_chunks_as_it_grows(
    client: TestClient, engine: Engine, seeded: Seeded
) -> None:
    url = f"/api/runs/{seeded.running}/steps/build/log"
    tail = client.get(url, params={"tail": 1})
    assert tail.content == b"[40/40] compiling unit40.cpp\n"
    assert tail.headers["x-log-complete"] == "false"
    size = int(tail.headers["x-log-size"])
    whole = client.get(url, params={"offset": 0})
    assert len(whole.content) == size and whole.content.count(b"\n") == 40
    assert client.get(url, params={"offset": 480, "limit": 40}).content == whole.content[480:520]
    with session_scope(engine) as s:
        append_log_chunk(s, seeded.running_step, 2, size, b"linking libtorch_acme.so\n")
    more = client.get(url, params={"offset": size})
    assert more.content == b"linking libtorch_acme.so\n"
    assert client.get(url, params={"tail": 2}).content == (
        b"[40/40] compiling unit40.cpp\nlinking libtorch_acme.so\n"
    )


def test_matrix_has_the_latest_verdict_per_backend_and_target(
    client: TestClient, seeded: Seeded
) -> None:
    body = client.get("/api/matrix").json()
    assert body["backends"] == ["acme", "torch_openreg"]
    cells = {(c["backend"], c["torch_build_id"] or c["torch_spec"]): c for c in body["cells"]}
    openreg_213 = [
        c
        for c in body["cells"]
        if c["backend"] == "torch_openreg" and c["torch_version"] == "2.13.0"
    ]
    assert len(openreg_213) == 1
    assert openreg_213[0]["run_id"] == seeded.passed and openreg_213[0]["state"] == "passed"
    nightly = [c for c in body["cells"] if c["torch_version"] == "2.15.0.dev20261120"]
    assert [(c["run_id"], c["verdict"], c["verdict_subtype"]) for c in nightly] == [
        (seeded.failed, "upstream", "signature-changed")
    ]
    assert ("acme", "nightly") in cells  # queued, unresolved: shown under its spec
    # Newest target first.
    assert body["cells"][0]["run_id"] == seeded.queued
    only = client.get("/api/matrix", params={"backend": "acme"}).json()
    assert {c["backend"] for c in only["cells"]} == {"acme"}


def test_breakages_list_and_detail_with_history_and_evidence(
    client: TestClient, seeded: Seeded
) -> None:
    listing = client.get("/api/breakages").json()
    assert listing["total"] == 1
    assert listing["breakages"][0]["backend"] == "torch_openreg"
    detail = client.get(f"/api/breakages/{seeded.breakage}").json()
    assert detail["evidence"]["line"].startswith("error: 'getStream'")
    assert detail["evidence"]["finding"]["context"] == ["line two"]
    assert len(detail["history"]) == 1
    occurrence = detail["history"][0]
    assert occurrence["run_id"] == seeded.failed and occurrence["failures"] == 2
    assert occurrence["nodeids"] == [
        "tests/test_guard.py::test_stream",
        "tests/test_guard.py::test_event",
    ]
    assert occurrence["torch_version"] == "2.15.0.dev20261120"
    assert client.get("/api/breakages", params={"status": "resolved"}).json()["total"] == 0
    assert client.get("/api/breakages/424242").status_code == 404


def test_newest_green_build_per_backend(client: TestClient, seeded: Seeded) -> None:
    body = client.get("/api/pins/green").json()
    assert {(g["backend"], g["version"]) for g in body} == {
        ("acme", "2.13.0"),
        ("torch_openreg", "2.13.0"),
    }


def test_trigger_run_needs_the_bearer_token(
    client: TestClient, engine: Engine, seeded: Seeded, dispatcher: RecordingDispatcher
) -> None:
    body = {"backend": "acme", "torch": "pip:torch==2.14.1"}
    assert client.post("/api/runs", json=body).status_code == 401
    assert (
        client.post("/api/runs", json=body, headers={"Authorization": "Bearer wrong"}).status_code
        == 401
    )
    assert dispatcher.enqueued == []
    resp = client.post("/api/runs", json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert resp.status_code == 202
    run_id = resp.json()["run_id"]
    assert resp.headers["location"] == f"/api/runs/{run_id}"
    assert dispatcher.enqueued == [run_id]
    with Session(engine) as s:
        run = s.get_one(Run, run_id)
        assert (run.state, run.trigger, run.torch_spec) == ("queued", "api", "pip:torch==2.14.1")


def test_trigger_run_validates_its_body(
    client: TestClient, seeded: Seeded, dispatcher: RecordingDispatcher
) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    unknown = client.post("/api/runs", json={"backend": "nope", "torch": "installed"}, headers=auth)
    assert unknown.status_code == 404 and "nope" in unknown.json()["detail"]
    for torch in ("conda:torch", "pip:", "", "installed\x00", "0", "pip: torch"):
        resp = client.post("/api/runs", json={"backend": "acme", "torch": torch}, headers=auth)
        assert resp.status_code == 422, torch
    assert client.post("/api/runs", json={"backend": "acme"}, headers=auth).status_code == 422
    assert dispatcher.enqueued == []


def test_trigger_run_refuses_a_spec_the_grammar_refuses_and_makes_no_run(
    client: TestClient, engine: Engine, seeded: Seeded, dispatcher: RecordingDispatcher
) -> None:
    """The body's torch field is checked with the domain's grammar, which names what is
    wrong (in the validation error of that field)."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with Session(engine) as s:
        runs_before = s.scalar(select(func.count()).select_from(Run))
    for torch, problem in (
        ("pip:numpy==2.0", "the requirement must be for torch"),
        ("pip:torch==", "not a pip requirement"),
        ("wheel:/tmp/torch.tar.gz", "a wheel file name ends in .whl"),
        ("pip:torch==2.13.0@@not-a-url", "is not an http(s):// or file:// URL"),
        ("nightly:2026-13-01", "month must be in 1..12"),
        ("commit:not-a-sha", "commit: takes an upstream sha"),
        ("run:0", "run: takes a run id"),
        ("pip:torch=={x}", "not a pip requirement"),  # braces are no message template
    ):
        resp = client.post("/api/runs", json={"backend": "acme", "torch": torch}, headers=auth)
        assert resp.status_code == 422, torch
        [error] = resp.json()["detail"]
        assert error["loc"] == ["body", "torch"] and error["type"] == "torch_spec", error
        assert problem in error["msg"] and repr(torch) in error["msg"], error
    with Session(engine) as s:
        assert s.scalar(select(func.count()).select_from(Run)) == runs_before
    assert dispatcher.enqueued == []


def test_trigger_run_takes_the_pinned_forms_of_the_grammar(
    client: TestClient, engine: Engine, seeded: Seeded, dispatcher: RecordingDispatcher
) -> None:
    """nightly:DATE, commit:SHA and run:ID parse (the body had a pattern of its own that
    refused them all): a dated nightly is queued; what stops the others is said by the
    checks after the grammar, in a sentence that names the spec or the run."""
    auth = {"Authorization": f"Bearer {TOKEN}"}

    def post(torch: str) -> Any:
        return client.post("/api/runs", json={"backend": "acme", "torch": torch}, headers=auth)

    dated = post("nightly:2026-11-20")
    assert dated.status_code == 202, dated.text
    assert dispatcher.enqueued == [dated.json()["run_id"]]
    with Session(engine) as s:
        assert s.get_one(Run, dated.json()["run_id"]).torch_spec == "nightly:2026-11-20"

    commit = post("commit:" + "c" * 40)
    assert commit.status_code == 422
    assert "is not one a remote caller may ask for" in commit.json()["detail"]
    missing = post("run:999999")
    assert missing.status_code == 422
    assert missing.json()["detail"] == "run:999999: no run 999999"
    unprovisioned = post(f"run:{seeded.queued}")
    assert unprovisioned.status_code == 422
    assert f"run {seeded.queued} (queued) never provisioned a torch" in (
        unprovisioned.json()["detail"])
    assert len(dispatcher.enqueued) == 1


def test_an_operator_who_allows_any_spec_gets_commit_and_run_specs_queued(
    engine: Engine, tmp_path: Path, seeded: Seeded
) -> None:
    with session_scope(engine) as s:
        build = s.get_one(Run, seeded.passed).torch_build
        assert build is not None
        build.artifact_url = "https://download.example/torch-2.13.0-py3-none-any.whl"
        build.artifact_sha256 = "d" * 64
    settings = Settings(home=tmp_path, api_token=TOKEN, api_allow_any_torch_spec=True)
    dispatcher = RecordingDispatcher()
    with TestClient(create_app(settings, dispatcher=dispatcher, engine=engine)) as c:
        for torch in ("commit:" + "c" * 40, f"run:{seeded.passed}"):
            resp = c.post("/api/runs", json={"backend": "acme", "torch": torch},
                          headers={"Authorization": f"Bearer {TOKEN}"})
            assert resp.status_code == 202, (torch, resp.text)
    assert len(dispatcher.enqueued) == 2


def test_rerun_queues_a_failed_runs_failed_tests_once(
    client: TestClient, engine: Engine, seeded: Seeded, dispatcher: RecordingDispatcher
) -> None:
    with session_scope(engine) as s:
        s.add_all(
            TestResult(run_id=seeded.failed, nodeid=f"tests/test_ops.py::test_{name}",
                       suite="test_ops", outcome=outcome)
            for name, outcome in (("ok", "passed"), ("bad", "failed"), ("boom", "crashed"))
        )
    url = f"/api/runs/{seeded.failed}/rerun"
    assert client.post(url).status_code == 401
    assert dispatcher.enqueued == []
    auth = {"Authorization": f"Bearer {TOKEN}"}
    resp = client.post(url, headers=auth)
    assert resp.status_code == 202, resp.text
    new_id = resp.json()["run_id"]
    assert resp.headers["location"] == f"/api/runs/{new_id}"
    assert dispatcher.enqueued == [new_id]
    with Session(engine) as s:
        new = s.get_one(Run, new_id)
        assert (new.trigger, new.state) == ("rerun", "queued")
        assert new.trigger_info["rerun_of"] == seeded.failed
        assert sorted(new.trigger_info["failed_tests"]) == [
            "tests/test_ops.py::test_bad", "tests/test_ops.py::test_boom"]
    # Asked again while pending: the same rerun, not a second one.
    assert client.post(url, headers=auth).json()["run_id"] == new_id

    for run_id, state in ((seeded.passed, "passed"), (seeded.running, "running")):
        refused = client.post(f"/api/runs/{run_id}/rerun", headers=auth)
        assert refused.status_code == 409 and f"is {state}" in refused.json()["detail"]
    assert client.post("/api/runs/999999/rerun", headers=auth).status_code == 404


def test_writes_are_refused_when_no_token_is_configured(
    engine: Engine, tmp_path: Path, seeded: Seeded
) -> None:
    app = create_app(Settings(home=tmp_path), dispatcher=RecordingDispatcher(), engine=engine)
    with TestClient(app) as c:
        resp = c.post(
            "/api/runs",
            json={"backend": "acme", "torch": "installed"},
            headers={"Authorization": "Bearer "},
        )
        assert resp.status_code == 401
        assert "OOTCI_API_TOKEN is not set" in resp.json()["detail"]


def test_healthz_ok(client: TestClient, seeded: Seeded) -> None:
    resp = client.get("/healthz")
    assert resp.status_code == 200
    assert resp.json()["checks"]["database"] == "ok"


def test_healthz_503_names_the_broker_that_is_down(engine: Engine, tmp_path: Path) -> None:
    from service.dispatch import CeleryDispatcher

    settings = Settings(home=tmp_path, broker_url="redis://127.0.0.1:1/0")
    app = create_app(
        settings,
        dispatcher=CeleryDispatcher(settings.broker_url, connect_timeout_s=0.5),
        engine=engine,
    )
    with TestClient(app) as c:
        resp = c.get("/healthz")
    assert resp.status_code == 503
    body = resp.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"] == "ok"
    assert "127.0.0.1:1" in body["checks"]["broker"]


def test_healthz_503_when_the_database_is_down(tmp_path: Path) -> None:
    from service.db import make_engine

    dead = make_engine("postgresql+psycopg://postgres@127.0.0.1:1/none")
    with TestClient(
        create_app(Settings(home=tmp_path), dispatcher=RecordingDispatcher(), engine=dead)
    ) as c:
        resp = c.get("/healthz")
    assert resp.status_code == 503
    assert "cannot reach database" in resp.json()["checks"]["database"]


def test_metrics_are_read_from_the_database(client: TestClient, seeded: Seeded) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    resp = client.get("/metrics")
    assert resp.status_code == 200
    families = {f.name: f for f in text_string_to_metric_families(resp.text)}
    by_state = {s.labels["state"]: s.value for s in families["ootci_runs"].samples}
    assert by_state == {"queued": 1, "running": 1, "passed": 2, "failed": 2, "errored": 0,
                        "waiting": 0}  # PR runs waiting for their upstream build
    assert families["ootci_queue_depth"].samples[0].value == 1
    hist = {
        (s.name, s.labels.get("step"), s.labels.get("le")): s.value
        for s in families["ootci_step_duration_seconds"].samples
    }
    assert hist[("ootci_step_duration_seconds_bucket", "build", "60.0")] == 1
    assert hist[("ootci_step_duration_seconds_bucket", "build", "30.0")] == 0
    assert hist[("ootci_step_duration_seconds_bucket", "test", "600.0")] == 0
    assert hist[("ootci_step_duration_seconds_bucket", "test", "+Inf")] == 1
    assert hist[("ootci_step_duration_seconds_sum", "test", None)] == 700.0
    assert hist[("ootci_step_duration_seconds_count", "provision", None)] == 1


def test_openapi_documents_every_route(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path in (
        "/api/runs",
        "/api/runs/{run_id}",
        "/api/runs/{run_id}/tests",
        "/api/runs/{run_id}/steps/{name}/log",
        "/api/runs/{run_id}/rerun",
        "/api/matrix",
        "/api/breakages",
        "/api/breakages/{breakage_id}",
        "/webhooks/github",
        "/healthz",
        "/metrics",
    ):
        assert path in paths
    assert client.get("/docs").status_code == 200


def _ootci_json(db_url: str, home: Path, *args: str) -> Any:
    """``ootci ARGS --json`` in a process of its own over the test's database."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    env.update(OOTCI_HOME=str(home), OOTCI_DATABASE_URL=db_url)
    proc = subprocess.run(
        [sys.executable, "-m", "service.cli", *args, "--json"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_cli_prints_the_documents_the_api_answers(
    client: TestClient, seeded: Seeded, db_url: str, tmp_path: Path
) -> None:
    """One wire shape: ``ootci show RUN --json`` is ``GET /api/runs/RUN`` and ``ootci runs
    --json`` is ``GET /api/runs``, for the same filters."""
    for run_id in (seeded.failed, seeded.running):
        api = client.get(f"/api/runs/{run_id}")
        assert api.status_code == 200
        assert _ootci_json(db_url, tmp_path, "show", str(run_id)) == api.json()
    detail = client.get(f"/api/runs/{seeded.failed}").json()
    assert detail["failures"] and detail["steps"] and detail["torch_build"]  # not a trivial match

    api_page = client.get("/api/runs", params={"limit": 3, "backend": "torch_openreg"}).json()
    cli_page = _ootci_json(db_url, tmp_path, "runs", "--limit", "3", "--backend", "torch_openreg")
    assert cli_page == api_page and len(api_page["runs"]) == 3
    # --torch filters as the API's torch_spec does: the whole spec, not a substring of it.
    assert _ootci_json(db_url, tmp_path, "runs", "--torch", "nightly") == (
        client.get("/api/runs", params={"torch_spec": "nightly", "limit": 20}).json()
    )
    assert _ootci_json(db_url, tmp_path, "runs", "--torch", "pip:torch")["runs"] == []
