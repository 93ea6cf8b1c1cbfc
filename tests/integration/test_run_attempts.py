"""Attempts are separate and the earlier ones stay visible: a real run whose first attempt
fails on infrastructure (the nightly index refuses connections) and whose retry passes
(the index is back). The run page shows attempt 2 as the run and attempt 1 folded, with
its step, the infra reason and a log link that answers attempt 1's log; the API and
`ootci show --json` carry the attempt history. On SQLite and Postgres."""

from __future__ import annotations

import datetime as dt
import json
import socket
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from service.api.app import create_app
from service.commands.runs import create_run, get_or_create_backend
from service.config import Settings
from service.db import session_scope
from service.models import Run, Step
from tests.support.fake_torch import NightlyIndex
from tests.support.faults import ootci
from tests.support.helpers import RecordingDispatcher
from tests.support.pyonly import write_pyonly_backend
from workers.pipeline.execute import execute_run

SUITE = "def test_ok():\n    assert 1 + 1 == 2\n"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_failing_once(engine: Engine, tmp_path: Path) -> tuple[Settings, int]:
    """Attempt 1 against an index that is down, attempt 2 once it answers."""
    backend = write_pyonly_backend(tmp_path / "pyonly", {"test_ok.py": SUITE})
    down = Settings(
        home=tmp_path / "home",
        database_url=str(engine.url),
        nightly_index_url=f"http://127.0.0.1:{_closed_port()}/simple",
        infra_retries=2,
        infra_retry_delay_s=60,
    )
    with session_scope(engine) as s:
        run_id = create_run(s, get_or_create_backend(s, "pyonly", str(backend)), "nightly",
                            trigger="api").id
    assert execute_run(engine, down, run_id, "w1", retry_infra=True) == "queued"

    index = NightlyIndex(tmp_path / "index")
    index.publish("2.14.0.dev20261126+cpu", "a" * 40, {})
    back = down.model_copy(update={"nightly_index_url": index.url})
    with session_scope(engine) as s:  # the backoff has passed
        s.get_one(Run, run_id).retry_at = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    assert execute_run(engine, back, run_id, "w2", retry_infra=True) == "passed"
    return back, run_id


def test_a_retried_run_keeps_its_first_attempt_folded_with_a_working_log_link(
    engine: Engine, tmp_path: Path
) -> None:
    settings, run_id = _run_failing_once(engine, tmp_path)
    with Session(engine) as s:
        rows = s.scalars(select(Step).where(Step.run_id == run_id).order_by(Step.id)).all()
        assert [(st.attempt, st.name, st.status) for st in rows] == [
            (1, "provision", "errored"),
            (2, "provision", "passed"), (2, "build", "passed"), (2, "test", "passed"),
            (2, "collect", "passed"),
        ]
        first_log = rows[0].read_log().decode()
        assert "package index unreachable" in first_log
        assert rows[0].log_path is not None and rows[0].log_path.endswith("provision.log")
        assert rows[1].log_path is not None and rows[1].log_path.endswith("provision.attempt2.log")

    with TestClient(create_app(settings, dispatcher=RecordingDispatcher(), engine=engine)) as client:
        _check_views(client, run_id, first_log)
        api = client.get(f"/api/runs/{run_id}").json()

    # `ootci show --json` prints what the API answers, attempt history included; the text
    # view names the earlier attempt and why it ended.
    shown = ootci(tmp_path / "home", "show", str(run_id), "--json",
                  OOTCI_DATABASE_URL=str(engine.url.render_as_string(hide_password=False)))
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["attempt_history"] == api["attempt_history"]
    text = ootci(tmp_path / "home", "show", str(run_id),
                 OOTCI_DATABASE_URL=str(engine.url.render_as_string(hide_password=False)))
    assert "earlier attempt 1: errored" in text.stdout
    assert "package index unreachable" in text.stdout


def _check_views(client: TestClient, run_id: int, first_log: str) -> None:
    detail = client.get(f"/api/runs/{run_id}").json()
    # The run is its current attempt: its steps, as before.
    assert detail["attempts"] == 2 and detail["state"] == "passed"
    assert [(st["name"], st["attempt"]) for st in detail["steps"]] == [
        ("provision", 2), ("build", 2), ("test", 2), ("collect", 2)]
    first, second = detail["attempt_history"]
    assert (first["attempt"], first["current"], first["outcome"]) == (1, False, "errored")
    assert "package index unreachable" in first["reason"]
    assert first["started_at"] is not None and first["finished_at"] is not None
    assert [st["name"] for st in first["steps"]] == ["provision"]
    assert first["steps"][0]["log_url"] == f"/api/runs/{run_id}/steps/provision/log?attempt=1"
    assert (second["attempt"], second["current"], second["outcome"]) == (2, True, "passed")
    assert len(second["steps"]) == 4

    # The current attempt's log by default, an earlier one's by number, 404 past the last.
    assert "package index unreachable" not in client.get(
        f"/api/runs/{run_id}/steps/provision/log").text
    old = client.get(first["steps"][0]["log_url"])
    assert old.status_code == 200 and old.text == first_log
    assert "attempt1" in old.headers["content-disposition"]
    assert client.get(f"/api/runs/{run_id}/steps/build/log?attempt=1").status_code == 404
    assert client.get(f"/api/runs/{run_id}/steps/build/log?attempt=3").status_code == 404

    page = client.get(f"/runs/{run_id}").text
    steps_table, _, rest = page.partition('<details class="attempt" id="attempt-1">')
    assert rest, "attempt 1 is not folded on the run page"
    folded = rest.partition("</details>")[0]
    assert "Attempt 1" in folded and "package index unreachable" in folded
    assert f'href="/api/runs/{run_id}/steps/provision/log?attempt=1"' in folded
    assert 'id="attempt-2"' not in page  # the current attempt is the run, not a fold
    for name in ("provision", "build", "test", "collect"):
        assert f'<tr data-step="{name}">' in steps_table
    # What the live page polls is the current attempt's steps only.
    status = client.get(f"/runs/{run_id}/status.json").json()
    assert [st["status"] for st in status["steps"]] == ["passed"] * 4
