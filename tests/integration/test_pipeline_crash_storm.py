"""A torch whose ``manual_seed`` segfaults crashes every test that seeds. The test step stops
restarting pytest at the third alike crash, records the rest as not run, and the run shows
one breakage naming the crash by its signature, blamed on upstream (only torch changed
since the same suite passed). The real pipeline on SQLite: two ``path:`` overlays of the
installed torch, the second with ``torch/random.py`` patched, and a pure-Python backend."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.commands.runs import create_run, get_or_create_backend
from service.config import Settings
from service.db import make_engine, session_scope
from service.migrate import upgrade
from service.models import Breakage, Failure, Run, StepName
from tests.support.pyonly import write_pyonly_backend
from tests.support.torch_overlay import SEGFAULTING_MANUAL_SEED, overlay_of_installed_torch
from workers.pipeline.execute import execute_run

SEEDING = "import torch\n" + "".join(
    f"\n\ndef test_{i}():\n    torch.manual_seed({i})\n" for i in range(5))
CRASH = "Segmentation fault (SIGSEGV) in torch/random.py:manual_seed"


def _test_step_seconds(run: Run) -> float:
    step = next(s for s in run.steps if s.name == StepName.TEST)
    return float(step.duration_s or 0.0)


def test_a_seeding_crash_storm_ends_the_step_at_the_third_crash_as_one_upstream_breakage(
    tmp_path: Path,
) -> None:
    green = overlay_of_installed_torch(tmp_path / "green", "2.13.0+green", "a" * 40)
    storm = overlay_of_installed_torch(
        tmp_path / "storm", "2.13.0+storm", "b" * 40,
        {"random.py": lambda text: text + SEGFAULTING_MANUAL_SEED})
    backend = write_pyonly_backend(
        tmp_path / "pyonly", {"test_seed_a.py": SEEDING, "test_seed_b.py": SEEDING})
    engine = make_engine(f"sqlite:///{tmp_path / 'ootci.db'}")
    upgrade(engine)
    # One process: a parallel step's parts each count their own storm.
    settings = Settings(home=tmp_path / "home", database_url=str(engine.url), broker_url="",
                        test_processes=1)
    run_ids = []
    for overlay in (green, storm):
        with session_scope(engine) as s:
            b = get_or_create_backend(s, "pyonly", str(backend))
            run_ids.append(create_run(s, b, f"path:{overlay}", trigger="api").id)
        execute_run(engine, settings, run_ids[-1], "w1")

    with Session(engine) as s:
        first, second = (s.get_one(Run, i) for i in run_ids)
        assert (first.state, second.state) == ("passed", "failed")
        step = next(st for st in second.steps if st.name == StepName.TEST)
        assert step.status == "failed"  # the crashes are results, not an errored step
        log = step.read_log().decode()
        assert log.count("ootci: pytest run ") <= 3
        assert "crash storm: 3 tests crashed the same way" in log
        outcomes = {t.nodeid: (t.outcome, t.message) for t in second.test_results}
        crashed = [n for n, (o, _) in outcomes.items() if o == "crashed"]
        assert crashed == [f"tests/test_seed_a.py::test_{i}" for i in range(3)]
        assert {m for n, (o, m) in outcomes.items() if o == "crashed"} == {CRASH}
        not_run = {n: m for n, (o, m) in outcomes.items() if o == "skipped"}
        assert len(not_run) == 7
        assert set(not_run.values()) == {f"not run: same crash as {crashed[0]}"}

        failures = s.scalars(select(Failure).where(Failure.run_id == second.id)).all()
        assert {(f.triage, f.subtype) for f in failures} == {("upstream", "crash")}
        (breakage,) = s.scalars(select(Breakage)).all()
        assert {f.breakage_id for f in failures} == {breakage.id}
        assert (breakage.category, breakage.title) == ("upstream", f"crash: {CRASH}")
        assert (second.verdict, second.verdict_subtype) == ("upstream", "crash")
        green_s, storm_s = _test_step_seconds(first), _test_step_seconds(second)
    engine.dispose()
    # What it costs is bounded by the count of pytest processes asserted above (3, not one
    # per test); the seconds only say so on a quiet machine (CONTRIBUTING: no timed tests).
    print(f"test step: green {green_s:.1f} s, storm {storm_s:.1f} s "
          f"({storm_s / max(green_s, 0.1):.1f}x)")
