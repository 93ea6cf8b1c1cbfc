"""`ootci culprit` and `ootci report` as a user meets them: one clear line with exit 2 for
what cannot be answered. (The culprit corpus score: tests/unit/evals/test_evals_cli.py.)"""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy.orm import Session

from service.db import make_engine
from service.migrate import upgrade
from service.models import Run, RunState
from tests.support.cli import ootci
from tests.support.factories import make_backend, make_run


def test_unanswerable_questions_are_one_line_and_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "home" / "ootci.db"
    db.parent.mkdir(parents=True)
    engine = make_engine(f"sqlite:///{db}")
    upgrade(engine)
    with Session(engine) as session:
        ours, theirs = make_backend(session, "ours"), make_backend(session, "theirs")
        red = make_run(session, ours, state=RunState.FAILED)
        other = make_run(session, theirs, state=RunState.PASSED)
        session.commit()
        red_id, other_id = red.id, other.id
    engine.dispose()
    for args, said in [
        (("culprit",), "give a RUN"),
        (("culprit", "999"), "no run 999"),
        (("culprit", str(red_id)), f"run {red_id}: no regression range"),
        (("culprit", str(red_id), "--base-run", str(other_id)), "of another backend"),
        (("report", "999"), "no breakage 999"),
    ]:
        proc = ootci(tmp_path, *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_passed_run_has_no_culprit_and_says_so_with_exit_0(tmp_path: Path) -> None:
    db = tmp_path / "home" / "ootci.db"
    db.parent.mkdir(parents=True)
    engine = make_engine(f"sqlite:///{db}")
    upgrade(engine)
    with Session(engine) as session:
        green = Run(backend_id=make_backend(session).id, torch_spec="nightly",
                    state=RunState.PASSED, verdict="compatible")
        session.add(green)
        session.commit()
        green_id = green.id
    engine.dispose()
    proc = ootci(tmp_path, "culprit", str(green_id))
    assert proc.returncode == 0, proc.stderr
    assert f"run {green_id} passed (verdict compatible): nothing broke" in proc.stdout
    assert "--base-run" not in proc.stdout + proc.stderr
    doc = json.loads(ootci(tmp_path, "culprit", str(green_id), "--json").stdout)
    assert doc["suspects"] == [] and doc["range"]["base"] is None
    assert doc["note"].startswith(f"run {green_id} passed")
