"""What the isolating run repeats and on which torch (``isolate.plan``), on real rows: the
torch the failures last passed on (its recorded wheel, else its spec, never a moving one),
the first other pin when they never passed, and why nothing runs when neither works."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.config import Settings
from service.db import session_scope
from service.domain.classify import classify_test_failure
from service.domain.states import StepName
from service.domain.torch_spec import SourceKind
from service.domain.triage import TriageEvidence
from service.domain.verdict import Category, Stage, Subtype, TriageVerdict
from service.models import Backend, Failure, Run, TorchBuild
from tests.support.factories import make_backend, make_finished_run
from workers.pipeline.verdict import isolate
from workers.pipeline.verdict.collect import Triaged

NODE = "tests/test_x.py::test_y"


def _triaged(nodeid: str | None = NODE, against: int | None = None,
             category: Category = Category.UNKNOWN, step: StepName = StepName.TEST) -> Triaged:
    failure = Failure(run_id=0, step_name=step, stage=Stage.TEST, nodeid=nodeid, line="x")
    finding = classify_test_failure(nodeid or "x", "assert False", None)
    verdict = TriageVerdict(category, Subtype.GENERIC, "why",
                            needs_isolation=category is Category.UNKNOWN,
                            isolate_against_run_id=against)
    return Triaged(failure, finding, TriageEvidence(), verdict)


def _run(s: Session, backend: Backend, spec: str, *, wheel: bool = False,
         git: str = "a" * 40) -> Run:
    run = make_finished_run(s, backend, spec=spec)
    build = TorchBuild(spec=spec, source_kind=spec.split(":")[0], version="2.13.0",
                       git_version=git,
                       artifact_url="file:///w/torch.whl" if wheel else None,
                       artifact_sha256="c" * 64 if wheel else None)
    s.add(build)
    s.flush()
    run.torch_build = build
    return run


def test_a_first_night_isolates_on_the_first_other_pin_that_does_not_move(
    engine: Engine, tmp_path: Path
) -> None:
    settings = Settings(home=tmp_path, pins=["nightly", "pip:torch==2.13.0"])
    with session_scope(engine) as s:
        run = _run(s, make_backend(s), "path:/y")
        plan = isolate.plan(s, run, [_triaged(), _triaged(None, step=StepName.BUILD)], settings)
    assert plan is not None and plan.reference is not None
    assert plan.reference.spec.text == "pip:torch==2.13.0" and plan.reference.run_id is None
    assert plan.reference.whose(None) == "pin 'pip:torch==2.13.0'"
    assert plan.wanted == {0: NODE, 1: None}


def test_on_a_pin_the_reference_is_that_pin_so_the_run_itself_is_the_experiment(
    engine: Engine, tmp_path: Path
) -> None:
    # A first night on the known-good torch: failing there already says the backend, and
    # no other pin is provisioned for it.
    settings = Settings(home=tmp_path, pins=["pip:torch==2.13.0", "installed"])
    with session_scope(engine) as s:
        run = _run(s, make_backend(s), "installed")
        plan = isolate.plan(s, run, [_triaged()], settings)
    assert plan is not None and plan.runs_anything and plan.reference is not None
    assert plan.reference.spec.text == "installed" and plan.reference.run_id is None
    answers = isolate._on_this_runs_torch(plan, plan.reference)
    assert [(a.outcome.value, a.nodeid) for a in answers.values()] == [("failed", NODE)]
    assert "this run is the experiment" in answers[0].reference


def test_without_pins_nothing_runs_and_each_failure_says_why(
    engine: Engine, tmp_path: Path
) -> None:
    settings = Settings(home=tmp_path, pins=[])
    with session_scope(engine) as s:
        run = _run(s, make_backend(s), "installed")
        plan = isolate.plan(s, run, [_triaged()], settings)
    assert plan is not None and not plan.runs_anything
    (result,) = isolate.unanswered(plan).values()
    assert result.why == "no other torch to isolate against: no pins (OOTCI_PINS)"
    assert result.nodeid == NODE


def test_the_torch_it_passed_on_is_its_recorded_wheel_or_its_spec_never_a_moving_one(
    engine: Engine, tmp_path: Path
) -> None:
    settings = Settings(home=tmp_path, pins=["installed"])
    with session_scope(engine) as s:
        backend = make_backend(s)
        wheel = _run(s, backend, "pip:torch==2.13.0", wheel=True)
        pinned = _run(s, backend, "nightly:2026-11-20")
        moving = _run(s, backend, "nightly")
        run = _run(s, backend, "nightly", git="b" * 40)
        # Two failures passed on the wheel's run, one on the other: the wheel's wins.
        plan = isolate.plan(s, run, [_triaged(against=wheel.id), _triaged("t::b", wheel.id),
                                     _triaged("t::c", pinned.id)], settings)
        assert plan is not None and plan.reference is not None
        spec = plan.reference.spec
        assert (spec.text, spec.kind, spec.sha256) == (f"run:{wheel.id}", SourceKind.WHEEL, "c" * 64)
        assert plan.reference.whose(wheel.id) == f"the torch of run #{wheel.id} where it passed"
        assert plan.reference.whose(pinned.id).endswith("where other failures of this run passed")

        by_spec = isolate.plan(s, run, [_triaged(against=pinned.id)], settings)
        assert by_spec is not None and by_spec.reference is not None
        assert by_spec.reference.spec.text == "nightly:2026-11-20"
        assert by_spec.reference.recorded is not None

        none = isolate.plan(s, run, [_triaged(against=moving.id)], settings)
        assert none is not None and none.reference is None
        assert none.why_not == (f"run #{moving.id}'s torch spec 'nightly' cannot give its torch "
                                "again (a moving spec, and no wheel recorded)")


def test_nothing_is_isolated_after_an_infra_failure_nor_with_the_setting_off(
    engine: Engine, tmp_path: Path
) -> None:
    with session_scope(engine) as s:
        run = _run(s, make_backend(s), "path:/x")
        found = [_triaged(), _triaged("t::disk", category=Category.INFRA)]
        plan = isolate.plan(s, run, found, Settings(home=tmp_path, pins=["installed"]))
        assert plan is not None and not plan.wanted and not plan.runs_anything
        assert plan.skipped[0].startswith("the run met an infrastructure failure")
        assert isolate.plan(s, run, found, Settings(home=tmp_path, isolate=False)) is None
        assert isolate.plan(s, run, [_triaged(category=Category.BACKEND)],
                            Settings(home=tmp_path)) is None
