"""The breakage page shows each suspect's verification: state, evidence, and its run
with links to that run's build and test logs."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.api.app import create_app
from service.config import Settings
from service.models import CulpritVerification
from tests.support.factories import make_backend, make_breakage, make_run


class NoDispatch:
    def enqueue_run(self, run_id: int) -> None:
        raise AssertionError("a page tried to enqueue a run")

    def check(self) -> None:
        return None

    def close(self) -> None:
        return None


def test_breakage_page_lists_verifications_with_their_runs_logs(engine: Engine, tmp_path: Path) -> None:
    with Session(engine) as s:
        backend = make_backend(s)
        red = make_run(s, backend, state="failed")
        breakage = make_breakage(s, backend, red)
        verify = make_run(s, backend, spec="path:/tmp/overlay", state="passed", trigger="verify")
        s.add_all([
            CulpritVerification(breakage_id=breakage.id, sha="9c384d5049ce" + "0" * 28, pr=120969,
                                state="confirmed", run_id=verify.id,
                                evidence="undoing this PR's changes to c10/core/Allocator.h makes "
                                         "vendor build and pass its tests <b>"),
            CulpritVerification(breakage_id=breakage.id, sha="a" * 40, pr=None, state="unverifiable",
                                run_id=None, evidence="its change is to compiled code only (x.cpp)"),
        ])
        s.commit()
        breakage_id, verify_id = breakage.id, verify.id
    client = TestClient(create_app(Settings(home=tmp_path / "home", database_url=str(engine.url)),
                                   dispatcher=NoDispatch(), engine=engine))
    html = client.get(f"/breakages/{breakage_id}").text
    section = html.split('id="verifications"')[1].split("</table>")[0]
    assert "<strong>confirmed</strong>" in section and "<strong>unverifiable</strong>" in section
    assert "makes vendor build and pass its tests &lt;b&gt;" in section  # escaped
    assert f"/runs/{verify_id}/steps/build/log" in section and f"/runs/{verify_id}/steps/test/log" in section
    assert 'href="https://github.com/pytorch/pytorch/pull/120969"' in section
    assert "no run" in section


def test_breakage_page_without_verifications_says_how_to_get_one(engine: Engine, tmp_path: Path) -> None:
    with Session(engine) as s:
        backend = make_backend(s)
        breakage_id = make_breakage(s, backend, make_run(s, backend, state="failed")).id
        s.commit()
    client = TestClient(create_app(Settings(home=tmp_path / "home", database_url=str(engine.url)),
                                   dispatcher=NoDispatch(), engine=engine))
    html = client.get(f"/breakages/{breakage_id}").text
    assert "No suspect has been verified yet" in html and "ootci culprit RUN --verify" in html
