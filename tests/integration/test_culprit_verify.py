"""Culprit verification end to end (issue #29): real `ootci run` processes build a header
backend with the real compiler against nightly wheels from a local index; one night's
header breaks it; `ootci culprit RUN --verify` undoes each top suspect's change in an
overlay of the red torch, runs the backend there as an ordinary run, and only the
suspect that run confirms is labelled on the fake GitHub, with a comment saying so."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from evals.paths import CULPRIT_CASES
from service.domain.verification import unified_patch
from service.models import Breakage, CulpritVerification, Run
from tests.support.cli import ootci_json as ootci
from tests.support.fake_github import FakeGitHub
from tests.support.fake_torch import NightlyIndex
from tests.support.header_backend import ALLOCATOR_H, ALLOCATOR_H_CONST, write_header_backend

pytest_plugins = ["tests.support.github_fixtures"]
pytestmark = pytest.mark.slow

REPO = "pytorch/pytorch"
LABEL = "module: PrivateUse1-break"
CASE = CULPRIT_CASES / "allocate-const.json"
HEADER = "c10/core/Allocator.h"
CULPRIT_PR = 120969




def _case(culprit_patch: str | None) -> dict[str, Any]:
    """The corpus case with the culprit's hunk for the header made exact for the test's
    wheels (the corpus's hunk is the real PR's, against the real header)."""
    case = copy.deepcopy(json.loads(CASE.read_text()))
    culprit = case["commits"][case["expected"]["sha"]]
    for f in culprit["files"]:
        if f["filename"] == HEADER:
            if culprit_patch is None:
                f.pop("patch", None)  # as GitHub omits it for a large file
            else:
                f["patch"] = culprit_patch
    return case


def _red_night(tmp_path: Path, fake_github: FakeGitHub, case: dict[str, Any], *,
               auto: bool = True) -> tuple[dict[str, str], int, str]:
    """A green night and a red one; with ``auto``, the red `ootci run` verifies its
    breakage's top suspects itself (else OOTCI_CULPRIT_VERIFY_TOP=0 for the nights)."""
    base, head = fake_github.load_compare_case(case)
    index = NightlyIndex(tmp_path / "index")
    backend = write_header_backend(tmp_path / "vendor")
    env = {
        "OOTCI_HOME": str(tmp_path / "home"),
        "OOTCI_DATABASE_URL": f"sqlite:///{tmp_path / 'ootci.db'}",
        "OOTCI_NIGHTLY_INDEX_URL": index.url,
        "OOTCI_GITHUB_API_URL": fake_github.url,
        "OOTCI_GITHUB_TOKEN": fake_github.token,
        "OOTCI_PUBLIC_URL": "https://ootci.example",
        "OOTCI_CULPRIT_VERIFY_TOP": "3" if auto else "0",
    }
    for day, git, header in ((20, base, ALLOCATOR_H), (21, head, ALLOCATOR_H_CONST)):
        index.publish(f"2.14.0.dev202611{day:02d}+cpu", git, {HEADER: header})
        code, runs, err = ootci(env, "run", "--torch", "nightly", "--backend", str(backend), "--json")
        assert runs is not None, err
    (red,) = runs
    assert (red["state"], red["verdict"]) == ("failed", "upstream")
    return env, red["id"], base


def _rows(env: dict[str, str]) -> tuple[list[CulpritVerification], list[Run], Breakage]:
    engine = create_engine(env["OOTCI_DATABASE_URL"])
    with Session(engine) as s:
        rows = list(s.scalars(select(CulpritVerification).order_by(CulpritVerification.id)))
        runs = list(s.scalars(select(Run).where(Run.trigger == "verify")))
        breakage = s.scalars(select(Breakage)).one()
        s.expunge_all()
    engine.dispose()
    return rows, runs, breakage


def test_a_red_night_verifies_its_culprit_by_undoing_it_and_only_then_labels(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    env, red_id, _ = _red_night(tmp_path, fake_github, _case(unified_patch(ALLOCATOR_H, ALLOCATOR_H_CONST)))

    # The red night ranked the range, commented (suspected), verified, then labelled.
    writes = [(w.method, w.path.split("/issues/")[-1]) for w in fake_github.writes()]
    (comment,) = fake_github.comments(REPO, CULPRIT_PR)
    assert writes == [("POST", f"{CULPRIT_PR}/comments"), ("POST", f"{CULPRIT_PR}/labels"),
                      ("PATCH", f"comments/{comment['id']}")]
    assert f"**confirmed**: undoing this PR's changes to {HEADER} makes vendor_hdr build" in comment["body"]
    assert fake_github.labels(REPO, CULPRIT_PR) == [LABEL]

    rows, runs, breakage = _rows(env)
    (confirmed,) = [r for r in rows if r.state == "confirmed"]
    assert confirmed.pr == CULPRIT_PR
    verify_run = next(r for r in runs if r.id == confirmed.run_id)
    assert verify_run.state == "passed" and verify_run.torch_spec.startswith("path:")
    assert verify_run.trigger_info["verify_of"] == red_id
    # Its torch is not the red one, and says so (triage's history must not mix them up).
    assert verify_run.torch_build is not None
    assert verify_run.torch_build.git_version.endswith(f"-undo-{confirmed.sha[:12]}")
    # An experiment is no occurrence: the breakage is as the red night left it.
    assert breakage.occurrences == 1 and breakage.status == "open"
    # The overlay was removed; nothing half-made is left.
    assert list((tmp_path / "home" / "verify").iterdir()) == []

    # `ootci culprit --json` carries each suspect's verification; the confirmed one first.
    code, doc, err = ootci(env, "culprit", str(red_id), "--json")
    assert code == 0, err
    top = doc["suspects"][0]
    assert top["pr"] == CULPRIT_PR and top["verification"] == {
        "state": "confirmed", "run_id": verify_run.id,
        "evidence": f"undoing this PR's changes to {HEADER} makes vendor_hdr build and pass its tests"}
    others = [s["verification"]["state"] for s in doc["suspects"][1:] if s["verification"]]
    assert others and "confirmed" not in others  # the decoys' headers are not in this torch
    assert len(_rows(env)[1]) == len(runs)  # reading it back ran nothing


def _with_init_change(case: dict[str, Any]) -> dict[str, Any]:
    """The culprit also edits torch/__init__.py, with no patch (taken from the base)."""
    culprit = case["commits"][case["expected"]["sha"]]
    culprit["files"].append({"filename": "torch/__init__.py", "status": "modified",
                             "additions": 1, "deletions": 1, "changes": 2})
    return case


@pytest.mark.parametrize(("variant", "state", "why"), [
    # GitHub left the patch out: the base's header comes from the contents API.
    ("contents", "confirmed", "undoing this PR's changes to c10/core/Allocator.h makes"),
    ("contents-404", "unverifiable", "c10/core/Allocator.h at dffce28a2e16: the contents API answered 404"),
    ("patch-does-not-apply", "unverifiable", "c10/core/Allocator.h: hunk 1 (line 1) is not in the file"),
    ("overlay-does-not-import", "error", "did not import"),
])
def test_bad_input_ends_unverifiable_or_error_with_why_and_labels_nothing(
    tmp_path: Path, fake_github: FakeGitHub, variant: str, state: str, why: str
) -> None:
    from tests.support.fake_torch import BROKEN_INIT

    exact = unified_patch(ALLOCATOR_H, ALLOCATOR_H_CONST)
    case = {
        "contents": _case(None),
        "contents-404": _case(None),
        "patch-does-not-apply": _case("@@ -1,2 +1,2 @@\n #pragma once\n-#include <cstdint>\n+#include <vector>"),
        "overlay-does-not-import": _with_init_change(_case(exact)),
    }[variant]
    base = case["compare"]["base_commit"]["sha"]
    if variant == "contents":
        fake_github.add_files_at(REPO, base, {HEADER: ALLOCATOR_H.encode()})
    if variant == "overlay-does-not-import":
        fake_github.add_files_at(REPO, base, {"torch/__init__.py": BROKEN_INIT.encode()})
    env, red_id, _ = _red_night(tmp_path, fake_github, case, auto=False)

    code, doc, err = ootci({**env, "OOTCI_CULPRIT_VERIFY_TOP": "3"},
                           "culprit", str(red_id), "--verify", "--json")
    assert code == 0, err
    (culprit,) = [s for s in doc["suspects"] if s["pr"] == CULPRIT_PR]
    assert culprit["verification"]["state"] == state, err
    assert why in culprit["verification"]["evidence"]
    confirmed = [s for s in doc["suspects"] if (s["verification"] or {}).get("state") == "confirmed"]
    assert fake_github.labels(REPO, CULPRIT_PR) == ([LABEL] if confirmed else [])
    made = tmp_path / "home" / "verify"
    assert not made.exists() or list(made.iterdir()) == []  # nothing half-made is left
    if state != "confirmed":
        (comment,) = fake_github.comments(REPO, CULPRIT_PR)
        assert f"**suspected** (not verified: {culprit['verification']['evidence']}" in comment["body"]
