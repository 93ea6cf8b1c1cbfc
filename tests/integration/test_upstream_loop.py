"""The upstream loop end to end, as a vendor's nightly meets it: real `ootci run`
processes build a backend with the real compiler against nightly wheels from a local
index, one night's headers break it, ootci finds the range and the PR, and tells that PR
on a real HTTP server speaking GitHub's REST API — once, edited later, resolved at last."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.domain.pr_comment import MARKER
from tests.support.cli import ootci_json as ootci
from tests.support.fake_github import FakeGitHub
from tests.support.header_backend import ALLOCATOR_H, ALLOCATOR_H_CONST
from tests.support.nightly_loop import database_url, nightly_loop

pytest_plugins = ["tests.support.github_fixtures"]
pytestmark = pytest.mark.slow

REPO = "pytorch/pytorch"
LABEL = "module: PrivateUse1-break"




@pytest.mark.parametrize("db", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_green_red_red_fixed_labels_and_comments_the_culprit_pr_once(
    db: str, tmp_path: Path, fake_github: FakeGitHub, request: pytest.FixtureRequest
) -> None:
    loop = nightly_loop(tmp_path, fake_github, database_url(db, tmp_path, request),
                        OOTCI_GITHUB_UNLABEL_ON_FIX="true")
    env, night, base, head = loop.env, loop.night, loop.base, loop.head

    green = night(20, base, ALLOCATOR_H)
    assert green["code"] == 0 and green["state"] == "passed"
    assert fake_github.writes() == []

    red = night(21, head, ALLOCATOR_H_CONST)
    assert red["code"] == 1
    assert (red["verdict"], red["verdict_subtype"]) == ("upstream", "signature-changed")
    (comment,) = fake_github.comments(REPO, 120969)
    assert comment["body"].startswith(MARKER) and "`vendor_hdr`" in comment["body"]
    assert "marked ‘override’, but does not override" in comment["body"] or \
        "marked 'override', but does not override" in comment["body"]
    assert "2.14.0.dev20261120+cpu" in comment["body"] and "2.14.0.dev20261121+cpu" in comment["body"]
    assert fake_github.labels(REPO, 120969) == [LABEL]
    # Nothing else on GitHub was written to: one PR, one label, one comment.
    assert {w.path.split("/issues/")[-1].split("/")[0] for w in fake_github.writes()} == {"120969"}

    # The same answer on demand, from the CLI, as JSON.
    code, doc, err = ootci(env, "culprit", str(red["id"]), "--json")
    assert code == 0, err
    assert (doc["range"]["base"], doc["range"]["head"]) == (base, head)
    assert doc["suspects"][0]["pr"] == 120969 and doc["suspects"][0]["reasons"]
    code, given, err = ootci(env, "culprit", str(red["id"]), "--base-run", str(green["id"]), "--json")
    assert code == 0 and given["suspects"] == doc["suspects"], err

    again = night(22, "c" * 40, ALLOCATOR_H_CONST)
    assert again["code"] == 1
    (edited,) = fake_github.comments(REPO, 120969)
    assert edited["id"] == comment["id"] and "seen 2 times" in edited["body"]

    fixed = night(23, "d" * 40, ALLOCATOR_H)
    assert fixed["code"] == 0
    (final,) = fake_github.comments(REPO, 120969)
    assert final["id"] == comment["id"] and "## ootci: resolved" in final["body"]
    assert fake_github.labels(REPO, 120969) == []
