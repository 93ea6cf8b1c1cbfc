"""Issue #30 item 4: a page per upstream PR (`/prs/{n}`, `GET /api/prs/{n}`) with every
backend's runs of the PR's wheel, the breakage naming it (score, verification), the repro
commands and, for a triager only, the dispute form; search finds it by PR number, torch
sha and torch version. Also the breakage page's reason for reporting nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from service.api.app import create_app
from service.commands.tokens import add_token
from service.config import Settings
from service.db import session_scope
from tests.support.factories import make_backend, make_breakage, make_run, make_torch_build
from tests.support.helpers import RecordingDispatcher

PR = 120969
HEAD = "ab12cd34" + "e" * 32  # the PR's head commit (its wheel's git version)
MERGED = "9c384d50" + "1" * 32  # the commit the PR landed as: the breakage's suspect
RED = "cdcd0001" + "2" * 32  # the first red nightly
GREEN = "0f0f0002" + "3" * 32
WHEEL = "wheel:https://download.example/pr-120969/torch-2.15.0-cp312-linux_x86_64.whl"
EVIDENCE = "undoing this PR's changes to c10/core/Allocator.h makes acme build and pass its tests"


@dataclass(frozen=True)
class World:
    runs: dict[str, int]
    breakage: int
    other_breakage: int
    verify_run: int
    tokens: dict[str, str]


@pytest.fixture
def world(engine: Engine) -> World:
    with session_scope(engine) as s:
        acme, vendor = make_backend(s, "acme"), make_backend(s, "vendor_x")
        make_torch_build(s, HEAD, spec=WHEEL, version="2.15.0a0+gitab12cd3", source_kind="wheel")
        runs = {}
        for backend, state, verdict in ((acme, "failed", "upstream"), (vendor, "passed", "compatible")):
            runs[backend.name] = make_run(
                s, backend, spec=WHEEL, git=HEAD, state=state, verdict=verdict, trigger="webhook",
                dedupe_key=f"pr:{PR}:{HEAD}:{backend.id}",
                trigger_info={"pr": PR, "sha": HEAD, "title": "Refactor the allocator hooks",
                              "url": f"https://github.com/pytorch/pytorch/pull/{PR}"},
            ).id
        make_torch_build(s, RED, version="2.15.0.dev20261001")
        red = make_run(s, acme, spec="nightly:2026-10-01", git=RED, state="failed", verdict="upstream")
        make_torch_build(s, GREEN, version="2.14.1")
        make_run(s, vendor, spec="2.14.1", git=GREEN, state="passed", verdict="compatible")
        verify = make_run(s, acme, spec="path:/tmp/overlay", state="passed", trigger="verify")
        breakage = make_breakage(
            s, acme, red, title="signature-changed: allocate", range_base_sha=GREEN,
            range_head_sha=RED, range_head_version="2.15.0.dev20261001",
            culprits=[
                {"sha": MERGED, "pr": PR, "title": "Refactor the allocator hooks", "score": 0.82,
                 "reasons": ["edits c10/core/Allocator.h, the header that declares allocate"],
                 "verification": {"state": "confirmed", "run_id": verify.id, "evidence": EVIDENCE,
                                  "files": []}},
                {"sha": "7" * 40, "pr": 12096, "title": "Unrelated", "score": 0.2, "reasons": []},
            ],
        )
        # A breakage naming PR 12096 only: its number is inside 120969's, never its suspect.
        other = make_breakage(s, vendor, fingerprint="other", culprits=[
            {"sha": "8" * 40, "pr": 12096, "title": "Unrelated", "score": 0.6, "reasons": []}])
        tokens = {role: add_token(s, f"{role}-1", role, actor="test").secret
                  for role in ("viewer", "triager")}
        return World(runs, breakage.id, other.id, verify.id, tokens)


@pytest.fixture
def client(engine: Engine, tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(Settings(home=tmp_path / "home", culprit_min_score=0.5),
                     dispatcher=RecordingDispatcher(), engine=engine)
    with TestClient(app) as c:
        yield c


def log_in(client: TestClient, token: str) -> None:
    form = client.get("/login").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', form)
    assert csrf is not None
    answer = client.post("/login", data={"token": token, "csrf": csrf.group(1)},
                         follow_redirects=False)
    assert answer.status_code == 303, answer.text


def test_the_api_answers_both_backends_runs_and_the_confirmed_suspect(
    client: TestClient, world: World,
) -> None:
    doc = client.get(f"/api/prs/{PR}").json()
    assert doc["number"] == PR and doc["title"] == "Refactor the allocator hooks"
    assert doc["url"] == f"https://github.com/pytorch/pytorch/pull/{PR}"
    assert doc["backends"] == ["acme", "vendor_x"]
    by_backend = {r["backend"]: r for r in doc["runs"]}
    assert by_backend["acme"]["run_id"] == world.runs["acme"] and by_backend["acme"]["verdict"] == "upstream"
    assert by_backend["vendor_x"]["state"] == "passed" and by_backend["vendor_x"]["head_sha"] == HEAD
    [suspicion] = doc["suspicions"]
    assert suspicion["breakage_id"] == world.breakage and suspicion["rank"] == 1
    assert suspicion["score"] == 0.82 and suspicion["verification"] == "confirmed"
    assert suspicion["verification_run_id"] == world.verify_run and suspicion["evidence"] == EVIDENCE
    commands = [r["command"] for r in doc["repro"]]
    assert f"ootci run --torch commit:{RED} --backend acme" in commands
    assert f"ootci run --torch {WHEEL} --backend vendor_x" in commands
    assert {HEAD, MERGED, RED} <= set(doc["shas"])


def test_a_number_inside_another_is_not_that_pr(client: TestClient, world: World) -> None:
    doc = client.get("/api/prs/12096").json()
    # Breakage 1 names 12096 as its second suspect, the other one as its top one.
    assert [(s["breakage_id"], s["rank"]) for s in doc["suspicions"]] == [
        (world.other_breakage, 1), (world.breakage, 2)]
    assert doc["runs"] == []


def test_an_unknown_pr_is_a_clear_404_and_a_non_number_a_422(client: TestClient, world: World) -> None:
    answer = client.get("/api/prs/4242")
    assert answer.status_code == 404
    assert answer.json()["detail"] == "PR #4242: ootci never ran its wheel nor suspected it of a breakage"
    assert client.get("/api/prs/abc").status_code == 422
    assert client.get("/api/prs/0").status_code == 422
    assert client.get("/prs/4242").status_code == 404
    assert client.get("/prs/abc").status_code == 422


def test_the_page_shows_runs_suspect_repro_and_no_dispute_form_logged_out(
    client: TestClient, world: World,
) -> None:
    html = client.get(f"/prs/{PR}").text
    runs = html.split('id="pr-runs"')[1].split("</table>")[0]
    for backend, run_id in world.runs.items():
        assert f'data-backend="{backend}"' in runs and f'href="http://testserver/runs/{run_id}"' in runs
    suspicions = html.split('id="suspicions"')[1].split("</table>")[0]
    assert f'/breakages/{world.breakage}"' in suspicions and "0.82" in suspicions
    assert "<strong>confirmed</strong>" in suspicions and f"/runs/{world.verify_run}" in suspicions
    assert f"ootci run --torch commit:{RED} --backend acme" in html
    assert 'href="https://github.com/pytorch/pytorch/pull/120969"' in html
    assert 'class="dispute"' not in html
    # Every link on the page resolves.
    for href in set(re.findall(r'href="(http://testserver/[^"#]+)"', html)):
        assert client.get(href).status_code == 200, href


def test_a_triager_gets_the_dispute_form_a_viewer_does_not(
    client: TestClient, world: World,
) -> None:
    log_in(client, world.tokens["viewer"])
    assert 'class="dispute"' not in client.get(f"/prs/{PR}").text
    client.cookies.clear()
    log_in(client, world.tokens["triager"])
    html = client.get(f"/prs/{PR}").text
    form = html.split('class="dispute"')[1].split("</form>")[0]
    action = re.search(r'action="([^"]+)"', form)
    assert action is not None and action.group(1).endswith(f"/breakages/{world.breakage}/dispute")
    assert f'name="pr" value="{PR}"' in form and 'name="reason"' in form
    csrf = re.search(r'name="csrf" value="([^"]+)"', form)
    assert csrf is not None and len(csrf.group(1)) > 20

    # The form as the page renders it is the dispute: the suspect is passed over.
    sent = client.post(action.group(1), data={"csrf": csrf.group(1), "pr": PR,
                                              "reason": "touches a header we do not include"},
                       follow_redirects=False)
    assert sent.status_code == 303, sent.text
    suspects = client.get(f"/api/breakages/{world.breakage}/culprits").json()["suspects"]
    assert [s["disputed"] for s in suspects if s["pr"] == PR] == [True]


@pytest.mark.parametrize("q", [f"#{PR}", str(PR), HEAD[:7], HEAD, MERGED[:9]])
def test_search_finds_the_pr_by_number_and_by_sha(client: TestClient, world: World, q: str) -> None:
    html = client.get("/search", params={"q": q}).text
    hits = html.split('id="id-hits"')[1].split("</section>")[0]
    assert f'href="http://testserver/prs/{PR}">PR #{PR}</a> Refactor the allocator hooks' in hits


def test_search_by_sha_finds_runs_and_breakages_and_by_version_its_runs(
    client: TestClient, world: World,
) -> None:
    red = client.get("/search", params={"q": RED[:10]}).text.split('id="id-hits"')[1]
    assert f"/breakages/{world.breakage}" in red.split("</section>")[0]
    head = client.get("/search", params={"q": HEAD[:8]}).text.split('id="id-hits"')[1]
    assert f"/runs/{world.runs['acme']}\"" in head and f"/runs/{world.runs['vendor_x']}\"" in head
    nightly = client.get("/search", params={"q": "2.15.0.dev20261001"}).text
    hits = nightly.split('id="id-hits"')[1].split("</section>")[0]
    assert "torch version" in hits and hits.count("<tr><td>") == 1 and "2.15.0.dev20261001" in hits
    assert "2.14.1" in client.get("/search", params={"q": "2.14.1"}).text.split('id="id-runs"')[1]
    assert "no PR, run or breakage" in client.get("/search", params={"q": "2.14.10"}).text
    assert "no PR, run or breakage" in client.get("/search", params={"q": "#4242"}).text


def test_the_breakage_page_does_not_call_0_82_below_a_minimum_of_0_5(
    client: TestClient, world: World,
) -> None:
    html = client.get(f"/breakages/{world.breakage}").text
    line = html.split('id="unreported"')[1].split("</p>")[0]
    assert "below" not in line and "#120969 (score 0.82)" in line
