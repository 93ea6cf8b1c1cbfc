"""One verdict everywhere: a small history made by the real collect step, then the matrix,
the run page, the breakage page, the API and ``ootci ... --json`` must name the same
category for every run and every failure (triage's, never the rule's), and a passed run is
``compatible`` on each of them. Real SQLite and Postgres."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from service.config import Settings
from service.db import session_scope
from service.domain.states import Outcome, StepStatus
from service.domain.verdict import severity_rank
from service.models import Breakage, Run, RunState, Step, TestResult, TorchBuild, utcnow
from tests.support.factories import make_backend
from tests.unit.service.api.test_pages import client_for
from tests.unit.service.cli.test_cli_errors import ootci
from workers.pipeline.steps.outcome import StepOutcome
from workers.pipeline.testrun.records import TestRecord, TestRunOutcome
from workers.pipeline.verdict.collect import collect

ONE, TWO, RED = "tests/test_one.py::t1", "tests/test_two.py::t2", "tests/test_red.py::red"
S1, S2 = "1" * 40, "2" * 40
# A matrix cell: its stage, verdict and run (two rows may have the same label: the same
# torch from two specs).
CELL = re.compile(r'<td class="cell [^"]*" data-backend="[^"]+" data-stage="([^"]+)" '
                  r'data-verdict="([a-z]+)"><a href="[^"]*/runs/(\d+)"')


def _torch(engine: Engine, spec: str, version: str, git: str) -> int:
    with session_scope(engine) as s:
        tb = TorchBuild(spec=spec, source_kind=spec.split(":")[0], version=version,
                        git_version=git, artifact_sha256=git[:1] * 64)
        s.add(tb)
        s.flush()
        return tb.id


def _night(engine: Engine, torch_build_id: int, sha: str, outcomes: dict[str, Outcome]) -> int:
    """One run of the backend through the real collect step."""
    with session_scope(engine) as s:
        backend = s.scalar(select(Run.backend_id).limit(1)) or make_backend(s, "acme").id
        tb = s.get_one(TorchBuild, torch_build_id)
        run = Run(backend_id=backend, torch_spec=tb.spec, torch_build_id=tb.id, backend_sha=sha,
                  state=RunState.RUNNING, started_at=utcnow())
        s.add(run)
        s.flush()
        failed = any(o in Outcome.FAILING for o in outcomes.values())
        test_status = StepStatus.FAILED if failed else StepStatus.PASSED
        for name, status in (("provision", StepStatus.PASSED), ("build", StepStatus.PASSED),
                             ("test", test_status)):
            s.add(Step(run_id=run.id, name=name, status=status))
        records = []
        for nodeid, outcome in outcomes.items():
            message = f"AssertionError: {nodeid} is wrong" if outcome in Outcome.FAILING else None
            record = TestRecord(nodeid, outcome, 0.1, message, message)
            records.append(record)
            s.add(TestResult(run_id=run.id, nodeid=nodeid, suite=record.suite, outcome=outcome,
                             message=message, details=message))
        s.flush()
        s.refresh(run)
        tests = TestRunOutcome(StepOutcome(test_status, 1 if failed else 0), tuple(records))
        state = collect(s, run, StepOutcome(StepStatus.PASSED, 0), tests,
                        Settings(home=Path("/nonexistent")), lambda _t: None)
        run.transition(state)
        return run.id


def _history(engine: Engine) -> dict[str, int]:
    old = _torch(engine, "pip:torch==2.13.0", "2.13.0", "a" * 40)
    new = _torch(engine, "pip:torch==2.15.0", "2.15.0", "b" * 40)
    # The same torch as `new` (version, commit, wheel), installed from another spec: its
    # own matrix row, but no torch change for triage.
    new_wheel = _torch(engine, "wheel:/w/torch-2.15.0.whl", "2.15.0", "b" * 40)
    newer = _torch(engine, "pip:torch==2.16.0", "2.16.0", "c" * 40)
    P, F = Outcome.PASSED, Outcome.FAILED
    return {
        # A first night: RED never passed and nothing failed like it before.
        "unknown": _night(engine, old, S1, {ONE: P, TWO: P, RED: F}),
        # ONE breaks on a new torch only (upstream); RED fails as before (backend).
        "upstream": _night(engine, new, S1, {ONE: F, TWO: P, RED: F}),
        # TWO breaks on the same torch with a new backend (backend).
        "backend": _night(engine, new_wheel, S2, {ONE: P, TWO: F, RED: F}),
        "compatible": _night(engine, newer, S2, {ONE: P, TWO: P, RED: P}),
    }


def _api(client: TestClient, run_id: int) -> dict[str, Any]:
    body = client.get(f"/api/runs/{run_id}").json()
    assert isinstance(body, dict)
    return body


def _suite(nodeid: str) -> str:
    return nodeid.split("::")[0].rsplit("/", 1)[1].removesuffix(".py")


def test_every_view_names_the_same_category_for_every_run(
    engine: Engine, tmp_path: Path
) -> None:
    runs = _history(engine)
    client = client_for(engine, tmp_path)
    docs = {run_id: _api(client, run_id) for run_id in runs.values()}

    # The verdicts themselves (what triage decided, from the history above).
    for verdict, run_id in runs.items():
        assert docs[run_id]["verdict"] == verdict, (verdict, docs[run_id]["verdict_reason"])
    upstream = {f["nodeid"]: f for f in docs[runs["upstream"]]["failures"]}
    assert upstream[ONE]["category"] == "upstream" and upstream[RED]["category"] == "backend"
    assert f"the rule suggests {upstream[ONE]['rule_category']}" in upstream[ONE]["triage_reason"]
    assert "only torch changed: 2.13.0 aaaaaaa → 2.15.0 bbbbbbb" in upstream[ONE]["triage_reason"]
    (first,) = docs[runs["unknown"]]["failures"]
    assert first["needs_isolation"] and first["isolate_against_run_id"] is None

    # The API's list, and the CLI's --json (the same documents).
    listed = {r["id"]: r["verdict"] for r in client.get("/api/runs?limit=50").json()["runs"]}
    url = engine.url.render_as_string(hide_password=False)
    cli_runs = ootci(tmp_path, "runs", "--json", "--limit", "50", OOTCI_DATABASE_URL=url)
    assert cli_runs.returncode == 0, cli_runs.stderr
    cli_listed = {r["id"]: r["verdict"] for r in json.loads(cli_runs.stdout)["runs"]}
    for run_id, doc in docs.items():
        assert listed[run_id] == cli_listed[run_id] == doc["verdict"]
        shown = ootci(tmp_path, "show", str(run_id), "--json", OOTCI_DATABASE_URL=url)
        assert shown.returncode == 0, shown.stderr
        cli_doc = json.loads(shown.stdout)
        assert cli_doc["verdict"] == doc["verdict"]
        assert [(f["nodeid"], f["category"]) for f in cli_doc["failures"]] == [
            (f["nodeid"], f["category"]) for f in doc["failures"]]

    # The run page: its verdict and each failure's badge.
    for run_id, doc in docs.items():
        html = client.get(f"/runs/{run_id}").text
        shown_verdict = re.search(r'<dt>Verdict</dt><dd><span class="badge v-([a-z]+)"', html)
        assert shown_verdict is not None and shown_verdict.group(1) == doc["verdict"]
        badges = re.findall(r'<p class="what"><span class="badge v-([a-z]+)"', html)
        assert badges == [f["category"] for f in doc["failures"]], run_id
        for f in doc["failures"]:  # the rule's category only as its suggestion
            assert f"; the rule suggests {f['rule_category']}</li>" in html
    first_night = client.get(f"/runs/{runs['unknown']}").text
    assert ("Needs isolation: it never passed in this backend's history; a run of this "
            "backend on an earlier torch would decide") in first_night

    # Search: each failure found is shown with its verdict.
    html = client.get("/search?q=is wrong").text
    found = re.findall(r'href="[^"]*/runs/(\d+)#failure-(\d+)">run \d+</a></td><td>[^<]*</td>\s*'
                       r'<td><span class="badge v-([a-z]+)"', html)
    expected = {(str(run_id), str(f["id"])): f["category"]
                for run_id, doc in docs.items() for f in doc["failures"]}
    assert found and {(r, i): v for r, i, v in found} == expected

    # The matrix: each failing suite's cell is its failure's category, and the worst cell
    # of a run is the run's verdict; a compatible run's cells all pass.
    matrix: dict[int, dict[str, str]] = {}
    for stage, verdict, run_id in CELL.findall(client.get("/").text):
        matrix.setdefault(int(run_id), {})[stage] = verdict
    for run_id, doc in docs.items():
        cells = matrix[run_id]
        for f in doc["failures"]:
            assert cells[_suite(f["nodeid"])] == f["category"], (run_id, f["nodeid"])
        failing = [v for v in cells.values() if v not in ("pass", "skipped", "notrun")]
        if doc["verdict"] == "compatible":
            assert failing == [], cells
        else:
            assert min(failing, key=severity_rank) == doc["verdict"], cells

    # The breakage pages: each occurrence's verdict is that run's failure's category.
    with session_scope(engine) as s:
        breakages = [(b.id, b.category) for b in s.scalars(select(Breakage).order_by(Breakage.id))]
    assert breakages
    for breakage_id, category in breakages:
        html = client.get(f"/breakages/{breakage_id}").text
        occurrences = re.findall(
            r'<a href="[^"]*/runs/(\d+)">run \d+</a></td>.*?<td class="verdict">'
            r'<span class="badge v-([a-z]+)"', html, flags=re.S)
        assert occurrences
        for run_id, verdict in occurrences:
            nodeids = [f for f in docs[int(run_id)]["failures"] if f["breakage_id"] == breakage_id]
            assert {f["category"] for f in nodeids} == {verdict}, (breakage_id, run_id)
        # The breakage reads as its latest occurrence (the first row: newest first).
        assert category == occurrences[0][1]
        detail = client.get(f"/api/breakages/{breakage_id}").json()
        assert detail["category"] == category
        assert [o["category"] for o in detail["history"]] == [v for _r, v in occurrences]


def test_a_passed_run_is_compatible_on_the_page_and_in_the_cli(
    engine: Engine, tmp_path: Path
) -> None:
    tb = _torch(engine, "pip:torch==2.13.0", "2.13.0", "a" * 40)
    run_id = _night(engine, tb, S1, {ONE: Outcome.PASSED, TWO: Outcome.FLAKY})
    client = client_for(engine, tmp_path)
    doc = _api(client, run_id)
    assert (doc["state"], doc["verdict"]) == ("passed", "compatible")
    assert doc["verdict_reason"] == "passed; 1 flaky test passed on rerun"
    html = client.get(f"/runs/{run_id}").text
    assert '<dt>Verdict</dt><dd><span class="badge v-compatible">compatible</span>' in html
    assert "none yet" not in html
    url = engine.url.render_as_string(hide_password=False)
    shown = ootci(tmp_path, "show", str(run_id), OOTCI_DATABASE_URL=url)
    assert shown.returncode == 0, shown.stderr
    assert "verdict: compatible — passed; 1 flaky test passed on rerun" in shown.stdout
    listed = ootci(tmp_path, "runs", OOTCI_DATABASE_URL=url)
    assert "compatible" in listed.stdout
