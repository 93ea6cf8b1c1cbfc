"""A breakage's range, suspects and reports, as the API and the breakage page show them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from service.api.app import create_app
from service.commands import culprits, outbox
from service.config import Settings
from service.models import OutboxKind, OutboxMessage
from tests.support.factories import make_backend, make_breakage
from tests.support.helpers import RecordingDispatcher
from tests.support.upstream_rows import breakage_with_range

BASE, HEAD = "a" * 40, "b" * 40
SUSPECT = {"sha": "9c384d5049ce" + "0" * 28, "pr": 120969,
           "title": "Turn Allocator::allocate into non-const", "score": 0.95,
           "reasons": ["edits c10/core/Allocator.h: a line declaring `allocate`"]}


@pytest.fixture
def client(engine: Engine, tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(home=tmp_path)
    with TestClient(create_app(settings, dispatcher=RecordingDispatcher(), engine=engine)) as c:
        yield c


def _reported(engine: Engine) -> int:
    with Session(engine) as session:
        breakage = breakage_with_range(session, BASE, HEAD)
        culprits.store_suspects(session, breakage, [SUSPECT], None, repo="pytorch/pytorch",
                                min_score=0.5)
        (report,) = session.scalars(select(OutboxMessage).where(
            OutboxMessage.kind == OutboxKind.PR_REPORT)).all()
        outbox.mark_sent(report, {"comment_url": "https://github.com/pytorch/pytorch/pull/120969#issuecomment-7"})
        session.commit()
        return breakage.id


def test_culprits_api_gives_range_suspects_and_where_it_was_posted(
    client: TestClient, engine: Engine
) -> None:
    breakage_id = _reported(engine)
    doc = client.get(f"/api/breakages/{breakage_id}/culprits").json()
    assert (doc["range"]["base"], doc["range"]["head"]) == (BASE, HEAD)
    assert doc["range"]["compare_url"] == f"https://github.com/pytorch/pytorch/compare/{BASE}...{HEAD}"
    # No verification has run: the key is there, null (issue #29).
    assert doc["suspects"] == [{**SUSPECT, "verification": None, "disputed": False}]
    posted = [r for r in doc["reports"] if r["kind"] == "pr-report"]
    assert posted[0]["state"] == "sent" and posted[0]["target"] == "pytorch/pytorch#120969"
    assert posted[0]["url"].endswith("#issuecomment-7")
    assert client.get("/api/breakages/999999/culprits").status_code == 404


def test_breakage_page_shows_the_range_the_reasons_and_the_comment_link(
    client: TestClient, engine: Engine
) -> None:
    page = client.get(f"/breakages/{_reported(engine)}").text
    assert f"/compare/{BASE}...{HEAD}" in page
    assert "edits c10/core/Allocator.h" in page and "0.95" in page
    assert "#issuecomment-7" in page


def test_no_range_is_said_plainly_not_guessed(client: TestClient, engine: Engine) -> None:
    with Session(engine) as session:
        backend = make_backend(session, "lonely")
        breakage = make_breakage(session, backend, fingerprint="f", subtype="header-moved",
                                 range_note="no passed run of this backend on track nightly before run #3",
                                 culprits_note="no suspect: no passed run of this backend")
        session.commit()
        breakage_id = breakage.id
    doc = client.get(f"/api/breakages/{breakage_id}/culprits").json()
    assert doc["range"]["base"] is None and doc["suspects"] == [] and doc["reports"] == []
    page = client.get(f"/breakages/{breakage_id}").text
    assert "No regression range: no passed run of this backend on track nightly" in page
