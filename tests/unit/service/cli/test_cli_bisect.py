"""`ootci bisect`'s answers without a probe to run: nothing to do, bad input (one line,
exit 2, nothing written), and probes another worker holds (exit 1, nothing run here)."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.db import make_engine
from service.models import Bisection, BisectionProbe, Run, RunState
from tests.support.cli import ootci
from tests.support.factories import make_backend, make_breakage, make_run


def _rows(tmp_path: Path) -> tuple[int, int]:
    engine = make_engine(f"sqlite:///{tmp_path / 'home' / 'ootci.db'}")
    try:
        with Session(engine) as s:
            return (int(s.scalar(select(func.count()).select_from(Run)) or 0),
                    int(s.scalar(select(func.count()).select_from(BisectionProbe)) or 0))
    finally:
        engine.dispose()


def test_nothing_to_bisect_and_bad_breakages_are_one_line_exit_2(tmp_path: Path) -> None:
    proc = ootci(tmp_path, "bisect", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []

    proc = ootci(tmp_path, "bisect", "42")
    assert proc.returncode == 2
    assert "no breakage 42" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1

    engine = make_engine(f"sqlite:///{tmp_path / 'home' / 'ootci.db'}")
    with Session(engine) as s:
        backend = make_backend(s)
        breakage = make_breakage(s, backend, make_run(s, backend, state=RunState.FAILED))
        s.commit()
        breakage_id = breakage.id
    engine.dispose()
    proc = ootci(tmp_path, "bisect", str(breakage_id))
    assert proc.returncode == 2
    assert "has no bisection" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr
    assert _rows(tmp_path) == (1, 0)


def test_probes_held_by_another_worker_are_not_run_here(tmp_path: Path) -> None:
    assert ootci(tmp_path, "bisect").returncode == 0  # migrates the home's database
    engine = make_engine(f"sqlite:///{tmp_path / 'home' / 'ootci.db'}")
    with Session(engine) as s:
        backend = make_backend(s)
        green = make_run(s, backend, git="1" * 40, state=RunState.PASSED)
        red = make_run(s, backend, git="5" * 40, state=RunState.FAILED)
        breakage = make_breakage(s, backend, red)
        bisection = Bisection(
            breakage_id=breakage.id, backend_id=backend.id, head_run_id=red.id,
            base_run_id=green.id, base_version="2.14.0.dev20261101+cpu",
            head_version="2.14.0.dev20261105+cpu", state="running", good_run_id=green.id,
            bad_run_id=red.id)
        s.add(bisection)
        s.flush()
        probe = make_run(s, backend, spec="nightly:2026-11-03", trigger="bisect",
                         state=RunState.RUNNING, claimed_by="elsewhere:1")
        s.add(BisectionProbe(bisection_id=bisection.id, night=probe.created_at.date(),
                             spec="nightly:2026-11-03", run_id=probe.id, result="pending"))
        s.commit()
        probe_id = probe.id
    proc = ootci(tmp_path, "bisect", OOTCI_NIGHTLY_INDEX_URL=(tmp_path / "no-index").as_uri())
    assert proc.returncode == 1, proc.stderr
    assert "running elsewhere" in proc.stderr
    with Session(engine) as s:
        assert s.get_one(Run, probe_id).state == RunState.RUNNING
    engine.dispose()
