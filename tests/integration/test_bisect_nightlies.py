"""Issue #29's acceptance, end to end: real `ootci` processes build a header backend with
the real compiler against five nightlies on a local index; the backend is green on night
1, misses nights 2-4 and is red on night 5. The range (night 1 .. night 5) is bisected
over the nights in between with at most 3 probe runs, narrowed to night 1 .. night 2, and
only that night's commits are ranked; the top suspect is verified by undoing its change
on night 5's torch: confirmed, the culprit PR gets one label and one comment saying so
from the fake GitHub, nothing else is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, select

from evals.paths import CULPRIT_CASES
from service.api.app import create_app
from service.config import Settings
from service.domain.verification import unified_patch
from service.models import Bisection, Run
from tests.support.cli import ootci_json as ootci
from tests.support.fake_github import FakeGitHub
from tests.support.fake_torch import NightlyIndex
from tests.support.header_backend import ALLOCATOR_H, ALLOCATOR_H_CONST, write_header_backend
from tests.support.helpers import RecordingDispatcher

pytest_plugins = ["tests.support.github_fixtures"]
pytestmark = pytest.mark.slow

REPO = "pytorch/pytorch"
LABEL = "module: PrivateUse1-break"
# The corpus case whose hidden PR makes Allocator::allocate const (#120969): its compare
# is night 1 .. night 2, the night that PR landed in.
CASE = CULPRIT_CASES / "allocate-const.json"
HEADER = "c10/core/Allocator.h"
LATER_NIGHTS = {23: "3" * 40, 24: "4" * 40, 25: "5" * 40}




def _case() -> dict[str, Any]:
    """The corpus case, the culprit's hunk for the header made exact for these wheels (the
    corpus's hunk is the real PR's, against the real header)."""
    case = json.loads(CASE.read_text())
    for f in case["commits"][case["expected"]["sha"]]["files"]:
        if f["filename"] == HEADER:
            f["patch"] = unified_patch(ALLOCATOR_H, ALLOCATOR_H_CONST)
    return dict(case)


def test_a_missed_stretch_is_bisected_to_one_night_and_its_confirmed_culprit_is_told(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    base, head = fake_github.load_compare_case(_case())
    index = NightlyIndex(tmp_path / "index")
    backend = write_header_backend(tmp_path / "vendor")
    database = f"sqlite:///{tmp_path / 'ootci.db'}"
    env = {
        "OOTCI_HOME": str(tmp_path / "home"),
        "OOTCI_DATABASE_URL": database,
        "OOTCI_NIGHTLY_INDEX_URL": index.url,
        "OOTCI_GITHUB_API_URL": fake_github.url,
        "OOTCI_GITHUB_TOKEN": fake_github.token,
        "OOTCI_PUBLIC_URL": "https://ootci.example",
    }

    def nightly_run() -> dict[str, Any]:
        code, runs, err = ootci(env, "run", "--torch", "nightly", "--backend", str(backend), "--json")
        assert runs is not None, err
        return {"code": code, **runs[0]}

    index.publish("2.14.0.dev20261121+cpu", base, {HEADER: ALLOCATOR_H})
    green = nightly_run()
    assert green["state"] == "passed"

    # Nights 2-5 are published while the backend's CI is down; it runs again on night 5.
    index.publish("2.14.0.dev20261122+cpu", head, {HEADER: ALLOCATOR_H_CONST})
    for day, sha in LATER_NIGHTS.items():
        index.publish(f"2.14.0.dev202611{day}+cpu", sha, {HEADER: ALLOCATOR_H_CONST})
    red = nightly_run()
    assert red["code"] == 1 and red["torch_build"]["git_version"] == LATER_NIGHTS[25]
    assert (red["verdict"], red["verdict_subtype"]) == ("upstream", "signature-changed")
    # Four nights of commits would be ranked; nothing is, until the bisection narrows them.
    assert fake_github.requests == [] or all("/compare/" not in r.path for r in fake_github.requests)
    assert fake_github.writes() == []

    code, docs, err = ootci(env, "bisect", "--json")
    assert code == 0, err
    (doc,) = docs
    assert doc["state"] == "narrowed"
    probes = doc["probes"]
    assert 1 <= len(probes) <= 3, probes
    # The middle night first (red), then night 2 (red): two probes for three nights.
    assert [(p["spec"], p["result"]) for p in probes] == [
        ("nightly:2026-11-23", "red"), ("nightly:2026-11-22", "red")]
    assert all(p["run_state"] == "failed" and p["run_id"] for p in probes)
    assert (doc["narrowed_to"]["good"], doc["narrowed_to"]["bad"]) == (
        "2.14.0.dev20261121+cpu", "2.14.0.dev20261122+cpu")
    assert (doc["narrowed_to"]["good_sha"], doc["narrowed_to"]["bad_sha"]) == (base, head)

    # Only the narrowed range was listed, and its culprit told once: one label, one comment.
    compares = [r.path for r in fake_github.requests if "/compare/" in r.path]
    assert compares and all(p.endswith(f"/compare/{base}...{head}") for p in compares), compares
    (comment,) = fake_github.comments(REPO, 120969)
    assert "2.14.0.dev20261121+cpu" in comment["body"] and "2.14.0.dev20261122+cpu" in comment["body"]
    assert f"**confirmed**: undoing this PR's changes to {HEADER} makes" in comment["body"]
    assert fake_github.labels(REPO, 120969) == [LABEL]
    # Nothing else written: the PR's one comment (posted, then edited to "confirmed") and label.
    assert {w.path.split("/issues/")[-1] for w in fake_github.writes()} == {
        "120969/comments", "120969/labels", f"comments/{comment['id']}"}

    # `ootci culprit RUN` ranks the same narrowed range for the red run.
    code, culprit, err = ootci(env, "culprit", str(red["id"]), "--json")
    assert code == 0, err
    assert (culprit["range"]["base"], culprit["range"]["head"]) == (base, head)
    assert culprit["suspects"][0]["pr"] == 120969
    assert culprit["suspects"][0]["verification"]["state"] == "confirmed"

    engine = create_engine(database)
    try:
        with engine.connect() as conn:
            (bisection,) = conn.execute(select(Bisection)).all()
            probe_runs = conn.execute(select(Run.trigger, Run.backend_sha).where(
                Run.id.in_([p["run_id"] for p in probes]))).all()
        assert {t for t, _ in probe_runs} == {"bisect"}
        # The API and the breakage page show the probes with links to their runs.
        with TestClient(create_app(Settings(home=tmp_path / "home"),
                                   dispatcher=RecordingDispatcher(), engine=engine)) as client:
            api = client.get(f"/api/breakages/{bisection.breakage_id}").json()
            page = client.get(f"/breakages/{bisection.breakage_id}").text
    finally:
        engine.dispose()
    assert api["bisection"]["state"] == "narrowed"
    assert [p["run_id"] for p in api["bisection"]["probes"]] == [p["run_id"] for p in probes]
    assert api["occurrences"] == 1  # the probes are experiments, not occurrences
    for p in probes:
        assert f'/runs/{p["run_id"]}"' in page and f'/runs/{p["run_id"]}/steps/build/log' in page
    assert "nightly:2026-11-23" in page and "narrowed to" in page
