"""Triage actions end to end (issue #30 item 2): real `ootci run` processes build a backend
against nightly wheels, one night's headers break it, ootci labels and comments on the
culprit PR on a real HTTP server speaking GitHub's REST API; then a person acts with
`ootci breakage ID ...`. A dispute takes the label off and edits the one comment to say
who disputed it and why, and the next red night does not label the PR again; a snoozed
breakage's next red night writes nothing to GitHub, and a newer torch ends a torch snooze."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from service.domain.pr_comment import MARKER
from service.models import AuditEntry, Breakage
from tests.support.cli import ootci_json as ootci
from tests.support.fake_github import FakeGitHub
from tests.support.header_backend import ALLOCATOR_H, ALLOCATOR_H_CONST
from tests.support.nightly_loop import database_url, nightly_loop

pytest_plugins = ["tests.support.github_fixtures"]
pytestmark = pytest.mark.slow

REPO = "pytorch/pytorch"
LABEL = "module: PrivateUse1-break"
PR = 120969  # the hidden culprit of tests/support/nightly_loop.CASE

Night = Callable[[int, str, str], dict[str, Any]]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def loop(request: pytest.FixtureRequest, tmp_path: Path,
         fake_github: FakeGitHub) -> tuple[dict[str, str], Night, tuple[str, str]]:
    world = nightly_loop(tmp_path, fake_github, database_url(request.param, tmp_path, request))
    return world.env, world.night, (world.base, world.head)


def _breakage_id(env: dict[str, str]) -> int:
    engine = create_engine(env["OOTCI_DATABASE_URL"])
    try:
        with Session(engine) as s:
            return s.scalars(select(Breakage.id)).one()
    finally:
        engine.dispose()


def _red_and_reported(env: dict[str, str], night: Night, shas: tuple[str, str],
                      fake_github: FakeGitHub) -> tuple[int, dict[str, Any]]:
    assert night(20, shas[0], ALLOCATOR_H)["code"] == 0
    assert night(21, shas[1], ALLOCATOR_H_CONST)["code"] == 1
    assert fake_github.labels(REPO, PR) == [LABEL]
    (comment,) = fake_github.comments(REPO, PR)
    return _breakage_id(env), comment


def test_a_dispute_unlabels_edits_the_comment_and_the_next_red_night_does_not_relabel(
    loop: tuple[dict[str, str], Night, tuple[str, str]], fake_github: FakeGitHub,
) -> None:
    env, night, shas = loop
    breakage_id, comment = _red_and_reported(env, night, shas, fake_github)

    code, _, err = ootci(env, "breakage", str(breakage_id), "dispute", str(PR),
                         "--reason", "it only renames a test helper")
    assert code == 0, err
    assert fake_github.labels(REPO, PR) == []
    (edited,) = fake_github.comments(REPO, PR)
    assert edited["id"] == comment["id"] and edited["body"].startswith(MARKER)
    assert "## ootci: disputed" in edited["body"]
    assert "Not this PR, said " in edited["body"] and "it only renames a test helper" in edited["body"]
    engine = create_engine(env["OOTCI_DATABASE_URL"])
    with Session(engine) as s:
        entry = s.scalars(select(AuditEntry).where(AuditEntry.action == "breakage.dispute")).one()
        assert entry.target == f"breakage:{breakage_id}" and entry.detail["pr"] == PR
    engine.dispose()

    # Disputing again is refused in one line, exit 2.
    code, _, err = ootci(env, "breakage", str(breakage_id), "dispute", str(PR), "--reason", "x")
    assert code == 2 and "already disputed" in err and len(err.strip().splitlines()) == 1

    writes = len(fake_github.writes())
    assert night(22, "c" * 40, ALLOCATOR_H_CONST)["code"] == 1
    assert fake_github.labels(REPO, PR) == []
    # Nothing more said on the disputed PR: no label, no edit of its comment.
    assert not [w for w in fake_github.writes()[writes:] if f"/issues/{PR}/" in w.path]


def test_a_snoozed_breakage_is_not_relabelled_and_a_newer_torch_ends_a_torch_snooze(
    loop: tuple[dict[str, str], Night, tuple[str, str]], fake_github: FakeGitHub,
) -> None:
    env, night, shas = loop
    breakage_id, comment = _red_and_reported(env, night, shas, fake_github)
    code, _, err = ootci(env, "breakage", str(breakage_id), "snooze", "--until", "2099-01-01",
                         "--reason", "known, fixed upstream next week")
    assert code == 0, err
    # Maintainers take the label off by hand; while snoozed, ootci does not put it back.
    fake_github.repos[REPO].labels[PR].remove(LABEL)
    writes = len(fake_github.writes())
    assert night(22, "c" * 40, ALLOCATOR_H_CONST)["code"] == 1
    assert fake_github.writes()[writes:] == []
    assert fake_github.labels(REPO, PR) == []
    assert "seen 1 time" in fake_github.comments(REPO, PR)[0]["body"]

    # Until the torch of night 22: night 23, on a newer nightly, ends it and speaks again.
    code, _, err = ootci(env, "breakage", str(breakage_id), "snooze", "--torch",
                         "2.14.0.dev20261122")
    assert code == 0, err
    assert night(23, "d" * 40, ALLOCATOR_H_CONST)["code"] == 1
    assert fake_github.labels(REPO, PR) == [LABEL]
    (edited,) = fake_github.comments(REPO, PR)
    assert edited["id"] == comment["id"] and "seen 3 times" in edited["body"]
