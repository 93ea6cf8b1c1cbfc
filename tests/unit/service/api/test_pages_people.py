"""The run page shows a quarantined test's failure apart from the ones that counted; /flaky
lists it; /audit shows who did what; a page's form needs a login."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from service.api.app import create_app
from service.commands.flaky import quarantine
from service.config import Settings
from service.db import session_scope
from service.models import Failure, RunState
from tests.support.factories import make_backend, make_finished_run
from tests.support.helpers import RecordingDispatcher

FLIP = "tests/test_ops.py::test_flip"
REAL = "tests/test_ops.py::test_real"


@pytest.fixture
def client(engine: Engine, tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(Settings(home=tmp_path / "home"), dispatcher=RecordingDispatcher(),
                     engine=engine)
    with TestClient(app) as c:
        yield c


def test_the_run_page_shows_quarantined_failures_apart(client: TestClient, engine: Engine) -> None:
    with session_scope(engine) as s:
        b = make_backend(s, "acme")
        run = make_finished_run(s, b)
        run.transition(RunState.FAILED)
        for nodeid, held in ((FLIP, True), (REAL, False)):
            s.add(Failure(run_id=run.id, step_name="test", stage="test", nodeid=nodeid,
                          line=f"AssertionError in {nodeid}", triage="flake", quarantined=held))
        quarantine(s, "acme", FLIP, actor="cli:me@here")
        run_id = run.id
    html = client.get(f"/runs/{run_id}").text
    failures, _, rest = html.partition('id="quarantined"')
    quarantined = rest.split("</section>", 1)[0]
    assert FLIP in quarantined and REAL not in quarantined
    assert REAL in failures.split('id="failures-h"', 1)[1]
    assert "Quarantined failures" in html and "(1)" in failures
    flaky = client.get("/flaky").text
    assert FLIP in flaky and "quarantined (manual, by cli:me@here" in flaky
    audit = client.get("/audit").text
    assert "flaky.quarantine" in audit and "cli:me@here" in audit
    # Not logged in: the page offers no forms, and a POST is a 401.
    assert "quarantine-new" not in flaky
    assert client.post("/flaky/quarantine", data={"backend": "acme", "nodeid": REAL}
                       ).status_code == 401
