"""The dashboard's HTML pages over real databases (SQLite and Postgres), through create_app."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from service.api.app import create_app
from service.commands.log_chunks import append_log_chunk
from service.config import Settings
from service.db import make_engine
from service.migrate import upgrade
from service.models import (
    Backend,
    Breakage,
    Failure,
    Run,
    Step,
    TestResult,
    TorchBuild,
)
from tests.support.factories import make_backend, make_breakage, make_run, make_torch_build
from tests.support.seed import SeedRefused, SeedSpec, seed_database


class NoDispatch:
    """create_app wants a Dispatcher; pages never enqueue."""

    def enqueue_run(self, run_id: int) -> None:
        raise AssertionError("a page tried to enqueue a run")

    def check(self) -> None:
        return None

    def close(self) -> None:
        return None


def client_for(engine: Engine, tmp_path: Path) -> TestClient:
    settings = Settings(home=tmp_path / "home", database_url=str(engine.url))
    return TestClient(create_app(settings, dispatcher=NoDispatch(), engine=engine))


@pytest.fixture
def client(engine: Engine, tmp_path: Path) -> TestClient:
    return client_for(engine, tmp_path)


SMALL = SeedSpec(nights=21, tests_per_suite=3)


@pytest.fixture
def seeded(engine: Engine, tmp_path: Path) -> TestClient:
    seed_database(engine, SMALL)
    return client_for(engine, tmp_path)


CELL = re.compile(
    r'<td class="cell v-[a-z]+[^"]*" data-backend="([^"]+)" data-stage="([^"]+)" '
    r'data-verdict="([a-z]+)">'
)


def matrix_rows(html: str) -> dict[str, dict[tuple[str, str], str]]:
    """target label -> (backend, stage) -> verdict, parsed from the matrix table."""
    rows: dict[str, dict[tuple[str, str], str]] = {}
    for chunk in html.split('<tr data-kind="')[1:]:
        label = re.search(r'class="kind k-[a-z]+">[a-z]+</span> ([^<]+)</th>', chunk)
        assert label is not None
        rows[label.group(1).strip()] = {(b, s): v for b, s, v in CELL.findall(chunk)}
    return rows


# --- empty state ----------------------------------------------------------------------------


def test_empty_database_shows_how_to_start_a_run(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200
    assert "No runs yet" in r.text
    assert "<code>ootci run</code>" in r.text
    for path in ("/breakages", "/tests", "/trends", "/search?q=hooks"):
        assert client.get(path).status_code == 200, path
    assert client.get("/runs/1").status_code == 404
    assert client.get("/breakages/1").status_code == 404


# --- matrix ---------------------------------------------------------------------------------


def test_matrix_cells_are_the_stored_verdicts(seeded: TestClient, engine: Engine) -> None:
    html = seeded.get("/").text
    rows = matrix_rows(html)
    with Session(engine) as s:
        # Nightlies only: a pin's row shows its latest run, older nights are not on it.
        builds = s.execute(
            select(TorchBuild, Backend.name, Failure)
            .join(Run, Run.torch_build_id == TorchBuild.id)
            .join(Backend, Backend.id == Run.backend_id)
            .join(Failure, Failure.run_id == Run.id)
            .where(TorchBuild.source_kind == "nightly")
        ).all()
        passed = s.execute(
            select(TorchBuild, Backend.name).join(Run, Run.torch_build_id == TorchBuild.id)
            .join(Backend, Backend.id == Run.backend_id)
            .where(Run.state == "passed", TorchBuild.source_kind == "nightly")
        ).all()
    assert builds, "the seed has failures"
    for build, backend, failure in builds:
        row = rows[build.label]
        stage = failure.stage if failure.stage in ("build", "import") else failure.nodeid.split(
            "::")[0].rsplit("/", 1)[1].removesuffix(".py")
        assert row[(backend, stage)] == failure.triage, (build.label, backend, stage)
        if failure.stage == "build":
            assert row[(backend, "import")] == "notrun"
    for build, backend in passed:
        verdicts = {v for (b, _s), v in rows[build.label].items() if b == backend}
        assert verdicts <= {"pass", "skipped", "flake"}, (build.label, backend, verdicts)


def test_matrix_filter_by_backend(seeded: TestClient) -> None:
    html = seeded.get("/?backend=openreg").text
    backends = {b for row in matrix_rows(html).values() for b, _ in row}
    assert backends == {"openreg"}


def test_only_what_changed_hides_rows_equal_to_the_previous_night(seeded: TestClient) -> None:
    every = matrix_rows(seeded.get("/").text)
    changed = matrix_rows(seeded.get("/?changed=true").text)
    assert 0 < len(changed) < len(every)
    labels = [lab for lab in every if ".dev" in lab]  # nightlies, newest first
    for newer, older in zip(labels, labels[1:], strict=False):
        if every[newer] == every[older]:
            assert newer not in changed
        else:
            assert newer in changed


def test_running_run_is_listed_in_progress(seeded: TestClient, engine: Engine) -> None:
    with Session(engine) as s:
        running = s.scalar(select(Run.id).where(Run.state == "running"))
    html = seeded.get("/").text
    assert f'href="http://testserver/runs/{running}">run {running}</a>' in html


# --- run page, status, logs -----------------------------------------------------------------


def test_run_page_shows_the_decisive_line_and_why(seeded: TestClient, engine: Engine) -> None:
    with Session(engine) as s:
        failure = s.scalars(select(Failure).where(Failure.stage == "build",
                                                  Failure.breakage_id.is_not(None))).first()
        assert failure is not None
    html = seeded.get(f"/runs/{failure.run_id}").text
    decisive = re.search(r'<span class="ln decisive"[^>]*><span class="no">(\d+)</span><mark>'
                         r"(.*?)</mark>", html)
    assert decisive is not None
    assert int(decisive.group(1)) == failure.line_no
    assert decisive.group(2) == failure.line.replace("'", "&#39;")
    assert "Why this verdict" in html
    assert f"<code>{failure.rule}</code>" in html
    assert f'href="http://testserver/breakages/{failure.breakage_id}"' in html
    assert f"/runs/{failure.run_id}/steps/build/log?page=1&amp;hl={failure.line_no}" in html


def test_a_failed_tests_evidence_is_its_report_not_a_log_line(
    seeded: TestClient, engine: Engine
) -> None:
    with Session(engine) as s:
        failure = s.scalars(select(Failure).where(Failure.nodeid.is_not(None))).first()
        assert failure is not None
        only_tests = not s.scalar(select(func.count()).where(
            Failure.run_id == failure.run_id, Failure.nodeid.is_(None)))
    html = seeded.get(f"/runs/{failure.run_id}").text
    assert "From the test's report (message and traceback)" in html
    assert "Traceback (most recent call last):" in html  # the context around the line
    if only_tests:
        assert "hl=" not in html  # nothing to highlight in the step log


def test_status_json_reports_steps(seeded: TestClient, engine: Engine) -> None:
    with Session(engine) as s:
        running = s.scalar(select(Run.id).where(Run.state == "running"))
    r = seeded.get(f"/runs/{running}/status.json")
    assert r.status_code == 200
    assert r.headers["cache-control"] == "no-store"
    body = r.json()
    assert body["state"] == "running" and body["finished"] is False
    assert [(st["name"], st["status"]) for st in body["steps"]] == [
        ("provision", "passed"), ("build", "passed"), ("test", "running"),
        ("collect", "pending")]
    assert seeded.get("/runs/999999/status.json").status_code == 404


def _run_with_log(engine: Engine, lines: int) -> int:
    with Session(engine) as s, s.begin():
        run = make_run(s, make_backend(s, "logs", "/src"), spec="installed", state="failed")
        step = Step(run_id=run.id, name="build", status="failed")
        step.store_log("".join(f"line {i}\n" for i in range(1, lines + 1)).encode())
        s.add(step)
        s.flush()
        return run.id


def test_log_is_paged_and_highlights_the_asked_line(client: TestClient, engine: Engine) -> None:
    run_id = _run_with_log(engine, 1200)
    first = client.get(f"/runs/{run_id}/steps/build/log").text
    assert "page 1 of 3" in first
    assert 'id="L500"' in first and 'id="L501"' not in first
    hl = client.get(f"/runs/{run_id}/steps/build/log?hl=1100").text
    assert "page 3 of 3" in hl
    assert re.search(r'class="ln decisive" id="L1100">.*?<mark>line 1100</mark>', hl)
    beyond = client.get(f"/runs/{run_id}/steps/build/log?page=99").text
    assert "page 3 of 3" in beyond
    assert client.get(f"/runs/{run_id}/steps/test/log").status_code == 404
    assert client.get(f"/runs/{run_id}/steps/BAD!/log").status_code == 422


def test_a_running_steps_log_opens_at_its_end_and_says_where_to_follow(
    client: TestClient, engine: Engine
) -> None:
    written = "".join(f"line {i}\n" for i in range(1, 1201)) + "compiling unit 12"  # mid-line
    with Session(engine) as s, s.begin():
        run = make_run(s, make_backend(s, "live", "/src"), spec="installed", state="running")
        step = Step(run_id=run.id, name="build", status="running", log_path="/elsewhere/build.log")
        s.add(step)
        s.flush()
        append_log_chunk(s, step.id, 0, 0, written.encode())
        run_id = run.id

    html = client.get(f"/runs/{run_id}/steps/build/log").text
    assert "page 3 of 3" in html  # the end, where new lines arrive
    assert 'id="L1201"' in html and "compiling unit 12" in html
    pre = re.search(r'<pre class="log" id="log"([^>]*)>', html)
    assert pre is not None
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', pre.group(1)))
    assert attrs == {"follow-url": f"/api/runs/{run_id}/steps/build/log",
                     "offset": str(len(written.encode())), "last-line": "1201", "partial": "true"}
    assert "log-live.js" in html and 'id="log-live-note"' in html
    # An earlier page is not where lines arrive: nothing follows there.
    assert "data-follow-url" not in client.get(f"/runs/{run_id}/steps/build/log?page=1").text

    with Session(engine) as s, s.begin():
        step = s.scalars(select(Step).where(Step.run_id == run_id)).one()
        step.status = "passed"
        step.store_log(written.encode() + b"\n")
    done = client.get(f"/runs/{run_id}/steps/build/log").text
    assert "page 1 of 3" in done
    assert "data-follow-url" not in done and "log-live.js" not in done


def test_a_run_waiting_to_be_retried_says_when(client: TestClient, engine: Engine) -> None:
    retry_at = dt.datetime(2026, 11, 26, 4, 30, tzinfo=dt.UTC)
    with Session(engine) as s, s.begin():
        run_id = make_run(
            s, make_backend(s, "retry", "/src"), spec="nightly", state="queued", attempts=1,
            retry_at=retry_at, error="infra error on attempt 1 of 3, retrying in 300 s: x",
        ).id
    html = client.get(f"/runs/{run_id}").text
    assert re.search(r"<dt>Attempts</dt><dd>1 · <span id=\"retry-at\">retried after an "
                     r"infrastructure failure, not before 2026-11-26 04:30 UTC</span>", html)
    assert "infra error on attempt 1 of 3" in html
    with Session(engine) as s, s.begin():
        done = s.get_one(Run, run_id)
        done.state, done.retry_at, done.attempts = "errored", None, 3
    assert "<dt>Attempts</dt><dd>3</dd>" in client.get(f"/runs/{run_id}").text


def test_a_reruns_test_list_is_counted_and_folded(client: TestClient, engine: Engine) -> None:
    failed = [f"tests/test_ops.py::test_case_{i}" for i in range(40)]
    with Session(engine) as s, s.begin():
        run_id = make_run(s, make_backend(s, "reruns", "/src"), spec="nightly", state="queued",
                          trigger="rerun",
                          trigger_info={"rerun_of": 7, "failed_tests": failed}).id
    html = client.get(f"/runs/{run_id}").text
    assert "rerun · rerun_of=7" in html
    assert '<details class="trigger-list"><summary>failed_tests: 40</summary>' in html
    assert html.count("<li><code>tests/test_ops.py::test_case_") == 40
    assert "failed_tests=[" not in html  # not one 40-item line in the facts


# --- breakages, tests, trends, search -------------------------------------------------------


def test_breakages_open_first_and_detail_history(seeded: TestClient, engine: Engine) -> None:
    html = seeded.get("/breakages").text
    statuses = re.findall(r'<td><span class="badge b-(open|resolved)">', html)
    assert statuses and statuses == sorted(statuses, key=lambda s: s != "open")
    with Session(engine) as s:
        b = s.scalars(select(Breakage).order_by(Breakage.occurrences.desc())).first()
        assert b is not None
        runs = set(s.scalars(select(Failure.run_id).where(Failure.breakage_id == b.id)))
    detail = seeded.get(f"/breakages/{b.id}").text
    history = detail.split('id="history"', 1)[1]
    assert {int(x) for x in re.findall(r">run (\d+)</a>", history)} == runs
    assert "Evidence from its first occurrence" in detail
    assert detail.count('class="ln decisive"') == 1
    only_open = seeded.get("/breakages?status=open").text
    assert 'b-resolved">resolved</span></td>' not in only_open


def test_test_history_lists_outcomes_newest_first(seeded: TestClient, engine: Engine) -> None:
    with Session(engine) as s:
        nodeid = s.scalar(select(TestResult.nodeid).where(TestResult.outcome == "failed"))
        assert nodeid is not None, "the seed has failing tests"
        total = s.scalar(select(func.count()).where(TestResult.nodeid == nodeid))
        failed = s.scalar(select(func.count()).where(TestResult.nodeid == nodeid,
                                                     TestResult.outcome == "failed"))
    html = seeded.get(f"/tests?nodeid={quote(nodeid)}&last=200").text
    table = html.split('id="history"', 1)[1]
    assert table.count("<tr><td class=\"when\">") == total
    assert f"Failed in {failed} of the {total} runs read." in html
    # The grid: one row per torch target, a pin's several runs collapse into its latest.
    with Session(engine) as s:
        targets = s.scalar(select(func.count(func.distinct(Run.torch_build_id)))
                           .join(TestResult, TestResult.run_id == Run.id)
                           .where(TestResult.nodeid == nodeid))
    assert html.count('<tr class="t">') == targets
    assert seeded.get(f"/tests?nodeid={quote(nodeid)}&last=3").text.count('<tr class="t">') == 3
    assert failed and failed < total
    assert seeded.get(f"/tests/{nodeid}").status_code == 200
    assert seeded.get("/tests?nodeid=tests/test_nope.py::test_x").status_code == 404
    index = seeded.get("/tests?q=device_COUNT").text
    assert "test_device_count" in index and "test_amp" not in index


def test_trends_count_breakages_per_week(seeded: TestClient, engine: Engine) -> None:
    html = seeded.get("/trends?weeks=8").text
    assert html.count("<svg") == 2
    opened = [int(x) for x in re.findall(
        r"<tr><td>\d{4}-\d\d-\d\d</td><td class=\"num\">(\d+)</td>", html)]
    with Session(engine) as s:
        assert sum(opened) == s.scalar(select(func.count(Breakage.id)))


def test_search_finds_tests_symbols_headers_and_errors(seeded: TestClient) -> None:
    by_header = seeded.get("/search?q=PrivateUse1HooksInterface.h").text
    assert "/breakages/" in by_header and "header-moved" in by_header
    by_symbol = seeded.get("/search?q=deviceCount").text
    assert "signature-changed" in by_symbol
    by_test = seeded.get("/search?q=Device_Count").text  # case-insensitive
    assert "tests/test_device.py::TestDevice::test_device_count" in by_test
    by_error = seeded.get("/search?q=Tensor-likes are not close").text
    assert "test-regression" in by_error
    # User wildcards are literal characters, not patterns.
    wild = seeded.get("/search?q=%25%25").text
    assert "/runs/" not in wild.split("<main>", 1)[1]
    assert "at least 2 characters" in seeded.get("/search?q=x").text


# --- escaping -------------------------------------------------------------------------------

XSS = "<script>alert('xss')</script>"


def test_everything_from_logs_tests_and_webhooks_is_escaped(
    client: TestClient, engine: Engine
) -> None:
    now = dt.datetime(2026, 11, 20, 3, tzinfo=dt.UTC)
    nodeid = f"tests/test_evil.py::test_{XSS}"
    with Session(engine) as s, s.begin():
        backend = make_backend(s, "evil", "/src")
        build = make_torch_build(s, "abc", version="2.14.0.dev1")
        run = make_run(s, backend, torch_build_id=build.id, state="failed", trigger="webhook",
                       created_at=now, verdict="upstream", verdict_reason=XSS,
                       trigger_info={"pr_title": XSS, "sender": "<img src=x onerror=alert(1)>"})
        step = Step(run_id=run.id, name="test", status="failed")
        step.store_log(f"collected 1 item\n{XSS}\nFAILED\n".encode())
        s.add(step)
        s.add(TestResult(run_id=run.id, nodeid=nodeid, suite="test_evil", outcome="failed",
                         message=XSS))
        breakage = make_breakage(s, backend, run, fingerprint="f", subtype="test-regression",
                                 title=XSS, captures={"symbol": XSS}, first_seen_at=now,
                                 last_seen_at=now, culprits=[{"pr": 1, "title": XSS,
                                                              "reasons": [XSS], "sha": "abc",
                                                              "score": 0.5}])
        s.add(Failure(run_id=run.id, step_name="test", stage="test", nodeid=nodeid, line=XSS,
                      line_no=2, captures={"symbol": XSS}, category="upstream",
                      subtype="test-regression", rule="pytest.assertion", triage="upstream",
                      triage_reason=XSS, breakage_id=breakage.id,
                      finding={"context_before": [XSS], "context_after": [XSS],
                               "explanation": XSS}))
        run_id, breakage_id = run.id, breakage.id
    pages = [
        "/", f"/runs/{run_id}", f"/runs/{run_id}/steps/test/log?hl=2",
        f"/tests?nodeid={quote(nodeid)}", "/tests", "/breakages", f"/breakages/{breakage_id}",
        "/search?q=script", "/search?q=" + quote(XSS),
    ]
    for path in pages:
        r = client.get(path)
        assert r.status_code == 200, path
        assert "<script>alert" not in r.text, path
        assert "<img src=x" not in r.text, path
        assert "&lt;script&gt;alert(" in r.text, path
    run_page = client.get(f"/runs/{run_id}").text
    assert "&lt;img src=x onerror=alert(1)&gt;" in run_page


# --- scale ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, TestClient]]:
    """10k runs on SQLite (one test per suite keeps the seed to a few seconds)."""
    tmp = tmp_path_factory.mktemp("big")
    engine = make_engine(f"sqlite:///{tmp / 'ootci.db'}")
    upgrade(engine)
    nights = -(-10_000 // 9)
    seed_database(engine, SeedSpec(nights=nights, tests_per_suite=1))
    yield engine, client_for(engine, tmp)
    engine.dispose()


def test_pages_render_with_10k_runs(big: tuple[Engine, TestClient]) -> None:
    engine, client = big
    with Session(engine) as s:
        assert s.scalar(select(func.count(Run.id))) >= 10_000
        oldest = s.scalar(select(func.min(Run.id)))
        breakage = s.scalar(select(func.max(Breakage.id)))
    first = client.get("/")
    assert first.status_code == 200
    rows1 = matrix_rows(first.text)
    assert len(rows1) == 30
    assert 'rel="next">older →</a>' in first.text
    rows2 = matrix_rows(client.get("/?page=2").text)
    assert len(rows2) == 30 and not set(rows1) & set(rows2)
    for path in (f"/runs/{oldest}", "/breakages", "/breakages?page=3", f"/breakages/{breakage}",
                 "/trends", "/search?q=deviceCount", "/tests",
                 "/tests?nodeid=tests/test_device.py::TestDevice::test_device_count"):
        assert client.get(path).status_code == 200, path


# --- the seed the pages are tested on -------------------------------------------------------


def test_seed_is_deterministic_and_its_evidence_points_into_the_logs(
    engine: Engine, tmp_path: Path
) -> None:
    seed_database(engine, SMALL)
    other = make_engine(f"sqlite:///{tmp_path / 'again.db'}")
    upgrade(other)
    seed_database(other, SMALL)

    def fingerprint(e: Engine) -> list[tuple[object, ...]]:
        with Session(e) as s:
            return [tuple(r) for r in s.execute(
                select(Failure.run_id, Failure.stage, Failure.nodeid, Failure.line_no,
                       Failure.subtype, Failure.breakage_id).order_by(Failure.id))]

    assert fingerprint(engine) == fingerprint(other)
    with Session(engine) as s:
        for failure in s.scalars(select(Failure)):
            if failure.nodeid:  # a test: classified from its JUnit report, as the pipeline does
                result = s.scalars(select(TestResult).where(
                    TestResult.run_id == failure.run_id, TestResult.nodeid == failure.nodeid)).one()
                lines = f"{result.message}\n{result.details}".split("\n")
            else:
                step = s.scalars(select(Step).where(Step.run_id == failure.run_id,
                                                    Step.name == failure.step_name)).one()
                lines = step.read_log().decode().split("\n")
            assert lines[failure.line_no - 1] == failure.line  # type: ignore[operator]
            assert failure.finding["context_before"] == lines[
                max(0, failure.line_no - 6): failure.line_no - 1]  # type: ignore[operator]
    with pytest.raises(SeedRefused):
        seed_database(other, SMALL)
    other.dispose()


def test_a_queued_run_without_a_resolved_torch(client: TestClient, engine: Engine) -> None:
    with Session(engine) as s, s.begin():
        run = make_run(s, make_backend(s, "fresh", "/src"), spec="pip:torch==2.99.0",
                       state="queued", trigger="api")
        run_id = run.id
    rows = matrix_rows(client.get("/").text)
    assert set(rows) == {"pip:torch==2.99.0"}
    assert set(rows["pip:torch==2.99.0"].values()) == {"queued"}
    page = client.get(f"/runs/{run_id}").text
    assert "pip:torch==2.99.0" in page and "No classified failure" in page
    assert client.get(f"/runs/{run_id}/status.json").json()["state"] == "queued"
    assert client.get("/?backend=nobody").status_code == 200


def test_matrix_lists_open_breakages_with_their_likely_culprit(
    seeded: TestClient, engine: Engine
) -> None:
    with Session(engine) as s:
        open_ = list(s.scalars(select(Breakage).where(Breakage.status == "open")))
        resolved = s.scalars(select(Breakage).where(Breakage.status == "resolved")).first()
    assert open_ and resolved is not None
    panel = seeded.get("/").text.split('id="open-h"', 1)[1].split("</section>", 1)[0]
    for b in open_[:6]:
        assert f'/breakages/{b.id}"' in panel
        if b.culprits:
            assert f'/pull/{b.culprits[0]["pr"]}">#{b.culprits[0]["pr"]}</a>' in panel
    assert f'/breakages/{resolved.id}"' not in panel
