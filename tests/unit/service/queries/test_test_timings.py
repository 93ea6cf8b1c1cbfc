"""The per-file test times that balance a backend's next test step."""

from __future__ import annotations

from sqlalchemy import Engine

from service.commands.runs import create_run, get_or_create_backend
from service.db import session_scope
from service.models import Run, TestResult
from service.queries.test_timings import seconds_per_file


def _run_with(engine: Engine, backend: str, times: dict[str, float | None]) -> int:
    with session_scope(engine) as s:
        run = create_run(s, get_or_create_backend(s, backend, f"/src/{backend}"), "installed",
                         trigger="cli")
        s.flush()
        s.add_all(TestResult(run_id=run.id, nodeid=n, suite="s", outcome="passed", duration_s=t)
                  for n, t in times.items())
        return run.id


def _seconds(engine: Engine, run_id: int) -> dict[str, float]:
    with session_scope(engine) as s:
        return seconds_per_file(s, s.get_one(Run, run_id))


def test_a_run_gets_its_backends_latest_earlier_times_summed_per_file(engine: Engine) -> None:
    _run_with(engine, "a", {"tests/test_x.py::old": 99.0})
    _run_with(engine, "a", {"tests/test_x.py::t1": 1.5, "tests/test_x.py::t2[4]": 2.0,
                            "tests/test_y.py::t": None})
    _run_with(engine, "b", {"tests/test_x.py::other": 50.0})
    now = _run_with(engine, "a", {})
    assert _seconds(engine, now) == {"tests/test_x.py": 3.5, "tests/test_y.py": 0.0}


def test_a_backends_first_run_has_no_times(engine: Engine) -> None:
    _run_with(engine, "b", {"tests/test_x.py::t": 5.0})
    assert _seconds(engine, _run_with(engine, "a", {})) == {}
