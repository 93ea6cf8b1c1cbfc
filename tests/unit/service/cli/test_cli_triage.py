"""`ootci breakage ID note|link|snooze|dispute|close|reopen` as a user runs it: each action
written with its audit entry as cli:user@host; bad input (unknown id, a past or malformed
date, a PR that is no suspect, an id that is no number) one line, exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from service.db import make_engine, session_scope
from service.migrate import upgrade
from service.models import AuditEntry, Breakage, RunState
from tests.support.cli import ootci
from tests.support.factories import make_backend, make_breakage, make_run

SUSPECTS = [{"sha": "a" * 40, "pr": 101, "title": "t", "score": 0.9, "reasons": []}]


def _seeded(tmp_path: Path) -> int:
    engine = make_engine(f"sqlite:///{tmp_path / 'home' / 'ootci.db'}")
    (tmp_path / "home").mkdir(exist_ok=True)
    upgrade(engine)
    with session_scope(engine) as s:
        backend = make_backend(s, "acme")
        red = make_run(s, backend, state=RunState.FAILED, git="c" * 40)
        bid = make_breakage(s, backend, red, culprits=SUSPECTS).id
    engine.dispose()
    return bid


def _state(tmp_path: Path, bid: int) -> tuple[Breakage, list[tuple[str, bool]]]:
    engine = make_engine(f"sqlite:///{tmp_path / 'home' / 'ootci.db'}")
    with session_scope(engine) as s:
        b = s.get_one(Breakage, bid)
        s.expunge(b)
        audit = [(e.action, e.actor.startswith("cli:") and "@" in e.actor)
                 for e in s.scalars(select(AuditEntry).order_by(AuditEntry.id))]
    engine.dispose()
    return b, audit


def test_each_action_from_the_cli_is_written_and_audited(tmp_path: Path) -> None:
    bid = _seeded(tmp_path)
    for args, says in ((("note", "known: see the bug"), "note set"),
                       (("link", "https://github.com/pytorch/pytorch/issues/9"), "linked"),
                       (("snooze", "--torch", "2.14.0.dev20261122", "--reason", "known"),
                        "snoozed until a torch newer than 2.14.0.dev20261122"),
                       (("dispute", "101", "--reason", "docs only"), "PR #101 disputed"),
                       (("close", "--reason", "fixed"), "closed"),
                       (("reopen",), "reopened")):
        done = ootci(tmp_path, "breakage", str(bid), *args)
        assert done.returncode == 0 and says in done.stdout, done.stdout + done.stderr
    b, audit = _state(tmp_path, bid)
    assert b.note == "known: see the bug" and b.snoozed_until_torch == "2.14.0.dev20261122"
    assert b.disputes[0]["reason"] == "docs only" and b.status == "open"  # type: ignore[index]
    assert audit == [(f"breakage.{a}", True)
                     for a in ("note", "link", "snooze", "dispute", "close", "reopen")]


def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path: Path) -> None:
    bid = _seeded(tmp_path)
    for args, says in (((str(bid + 1), "close"), f"breakage {bid + 1} does not exist"),
                       (("seven", "close"), "not a breakage id: 'seven'"),
                       ((str(bid), "snooze", "--until", "2001-01-01"), "is not in the future"),
                       ((str(bid), "snooze", "--until", "tomorrow"), "not an ISO date"),
                       ((str(bid), "snooze"), "give one of them"),
                       ((str(bid), "dispute", "5", "--reason", "x"), "not a suspect"),
                       ((str(bid), "link", "ftp://x/y"), "not an http(s) address"),
                       ((str(bid), "reopen"), "open already")):
        done = ootci(tmp_path, "breakage", *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert says in done.stderr + done.stdout, (args, done.stderr)
        assert len((done.stderr + done.stdout).strip().splitlines()) == 1, done.stderr
    b, audit = _state(tmp_path, bid)
    assert (b.note, b.links, b.snoozed_until, b.disputes, b.status) == (None, [], None, [], "open")
    assert audit == []
