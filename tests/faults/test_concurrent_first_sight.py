"""Eight `ootci run` processes started together on a fresh home, all on a torch build no
run has seen: eight finished runs and one TorchBuild row (they race to create the schema,
the backend, the environment and the TorchBuild row)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from sqlalchemy import func, select

from service.config import Settings
from service.db import make_engine, session_scope
from service.models import Backend, Run, TorchBuild
from tests.support.faults import let_build_finish, start_ootci, write_fault_backend

RUNS = 8


def test_eight_concurrent_runs_on_a_fresh_home_make_one_torch_build(tmp_path: Path) -> None:
    backend = write_fault_backend(tmp_path / "faulty", "ootci-fault-concurrent")
    let_build_finish(backend)
    home = tmp_path / "home"
    # The race is in the database, not the sandbox (whose probes cost each process seconds).
    procs: list[subprocess.Popen[bytes]] = [
        start_ootci(home, "run", "--torch", "installed", "--backend", str(backend), "--json",
                    log=tmp_path / f"run{i}.log", OOTCI_SANDBOX="false")
        for i in range(RUNS)
    ]
    codes = [p.wait(240) for p in procs]
    logs = [(tmp_path / f"run{i}.log").read_text() for i in range(RUNS)]
    assert codes == [0] * RUNS, [log[-1500:] for log, code in zip(logs, codes, strict=True) if code]
    engine = make_engine(Settings(home=home).resolved_database_url)
    with session_scope(engine) as s:
        states = s.scalars(select(Run.state)).all()
        assert sorted(states) == ["passed"] * RUNS
        assert s.scalar(select(func.count()).select_from(TorchBuild)) == 1
        assert s.scalar(select(func.count()).select_from(Backend)) == 1
        assert len(set(s.scalars(select(Run.torch_build_id)))) == 1
    printed = [json.loads(log[log.index("["):])[0]["state"] for log in logs]
    assert printed == ["passed"] * RUNS
