"""`ootci show` and `ootci runs` for a person: what the failure says, verbatim, even where it
looks like rich markup (``[category/subtype]``, node ids with parameters in brackets)."""

from __future__ import annotations

from pathlib import Path

from service.commands.runs import create_run, get_or_create_backend
from service.db import make_engine, session_scope
from service.migrate import upgrade
from service.models import Failure, RunState, Step, StepStatus, TestResult
from tests.support.cli import ootci_at

NODEID = "tests/test_ops.py::test_add[float32-openreg:0]"


def _failed_run(home: Path) -> int:
    engine = make_engine(f"sqlite:///{home / 'ootci.db'}")
    upgrade(engine)
    with session_scope(engine) as s:
        run = create_run(s, get_or_create_backend(s, "acme", "/srv/acme"), "installed",
                         trigger="cli")
        s.flush()
        run.state = RunState.FAILED
        run.verdict, run.verdict_subtype = "upstream", "signature-changed"
        step = Step(run_id=run.id, name="test", status=StepStatus.FAILED, duration_s=2.0)
        step.store_log(b"collected 2 items\n[gw0] FAILED test_add\n")
        s.add(step)
        s.add(Failure(run_id=run.id, step_name="test", stage="test", nodeid=NODEID,
                      line="TypeError: add() got [1] argument", line_no=2, captures={},
                      category="backend", subtype="signature-changed", rule="type-error",
                      finding={}, triage="upstream",
                      triage_reason="passed on run #0 [x]; only torch changed"))
        s.add(TestResult(run_id=run.id, nodeid=NODEID, suite="test_ops", outcome="failed"))
        run_id = run.id
    engine.dispose()
    return run_id


def test_show_prints_failures_and_log_tail_verbatim(tmp_path: Path) -> None:
    run_id = _failed_run(tmp_path)
    proc = ootci_at(tmp_path, "show", str(run_id))
    assert proc.returncode == 0, proc.stderr
    # Triage's verdict, never the rule's category, which is only its suggestion.
    assert (f"{NODEID} [upstream/signature-changed] rule=type-error (the rule suggests "
            "backend)") in proc.stdout
    assert "why: passed on run #0 [x]; only torch changed" in proc.stdout
    assert "TypeError: add() got [1] argument" in proc.stdout
    assert "[gw0] FAILED test_add" in proc.stdout  # the failed step's log tail


def test_runs_lists_the_run_with_its_verdict(tmp_path: Path) -> None:
    run_id = _failed_run(tmp_path)
    proc = ootci_at(tmp_path, "runs")
    assert proc.returncode == 0, proc.stderr
    assert f"│ {run_id} " in proc.stdout and "upstream" in proc.stdout and "installed" in proc.stdout
