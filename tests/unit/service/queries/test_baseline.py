"""The history triage reads: per failure, where the same test or step last passed, where
it first failed after that, and the earlier runs with the same fingerprint. Real SQLite
and Postgres."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, event
from sqlalchemy.orm import Session

from service.db import session_scope
from service.domain.triage import triage
from service.domain.verdict import Category
from service.models import (
    ConformanceResult,
    Failure,
    Run,
    RunState,
    Step,
    TestResult,
    TorchBuild,
)
from service.queries.baseline import history_for
from tests.support.factories import make_backend

OURS, THEIRS = "9f8e7d6" + "0" * 33, "1a2b3c4" + "0" * 33
A, B = "a" * 40, "b" * 40


def _torch(s: Session, version: str, git: str) -> TorchBuild:
    tb = TorchBuild(spec=f"pip:torch=={version}", source_kind="pip", version=version,
                    git_version=git, artifact_sha256=git[:1] * 64)
    s.add(tb)
    s.flush()
    return tb


def _run(s: Session, backend_id: int, tb: TorchBuild, sha: str, *, build: str = "passed",
         tests: dict[str, str] | None = None, fails: dict[str | None, str] | None = None,
         triaged: str = "backend") -> Run:
    """A finished run: its build step, test results (nodeid -> outcome) and failures
    (nodeid or None for the build -> fingerprint)."""
    run = Run(backend_id=backend_id, torch_spec=tb.spec, torch_build_id=tb.id, backend_sha=sha,
              state=RunState.FAILED if fails else RunState.PASSED)
    s.add(run)
    s.flush()
    s.add(Step(run_id=run.id, name="build", status=build))
    for nodeid, outcome in (tests or {}).items():
        s.add(TestResult(run_id=run.id, nodeid=nodeid, suite=nodeid.split("::")[0]
                         .rsplit("/", 1)[-1].removesuffix(".py"), outcome=outcome))
    for nodeid, fp in (fails or {}).items():
        s.add(_failure(run.id, nodeid, fp, triaged))
    s.flush()
    s.refresh(run)
    return run


def _failure(run_id: int, nodeid: str | None, fp: str, triaged: str | None = None) -> Failure:
    stage = "build" if nodeid is None else ("import" if "::" not in nodeid else "test")
    return Failure(run_id=run_id, step_name="build" if nodeid is None else "test", stage=stage,
                   nodeid=nodeid, line="x", category="upstream", subtype="generic",
                   fingerprint=fp, triage=triaged)


@contextmanager
def counted(engine: Engine) -> Iterator[list[str]]:
    statements: list[str] = []

    def count(conn: object, cursor: object, statement: str, *args: object) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            statements.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", count)


T1, T2, RED = "tests/test_a.py::t1", "tests/test_a.py::t2", "tests/test_b.py::red"


def test_a_test_is_compared_with_where_that_test_passed_not_a_green_run(engine: Engine) -> None:
    """The backend never had a green run (RED fails on every night): t1's new break on a
    new torch is still compared with the night t1 passed, and RED is pre-existing."""
    with session_scope(engine) as s:
        b = make_backend(s).id
        old, new = _torch(s, "2.13.0", A), _torch(s, "2.15.0", B)
        _run(s, b, old, OURS, tests={T1: "passed", T2: "passed", RED: "failed"},
             fails={RED: "fp-red"})
        second = _run(s, b, old, OURS, tests={T1: "passed", T2: "failed", RED: "failed"},
                      fails={RED: "fp-red", T2: "fp-t2"})
        now = _run(s, b, new, OURS, tests={T1: "failed", T2: "failed", RED: "failed"})
        failures = [_failure(now.id, T1, "fp-t1"), _failure(now.id, RED, "fp-red"),
                    _failure(now.id, T2, "fp-t2")]
        history = history_for(s, now, failures)
        t1, red, t2 = (history.evidence(f) for f in failures)

        assert t1.passed is not None and t1.passed.run_id == second.id and t1.broke is None
        assert t1.passed.torch is not None and t1.passed.torch.label == "2.13.0 aaaaaaa"
        assert t1.passed.backend == OURS
        assert t1.this is not None and t1.this.run_id == now.id
        assert triage(None, t1).category is Category.UPSTREAM

        assert red.passed is None
        assert [e.run_id for e in red.failed_before] == [second.id]  # one per identity pair
        assert triage(None, red).category is Category.BACKEND

        # t2 passed on the first night and broke on the second, same torch and backend.
        assert t2.passed is not None and t2.broke is not None
        assert (t2.passed.run_id, t2.broke.run_id) == (second.id - 1, second.id)
        assert triage(None, t2).category is Category.FLAKE


def test_the_backend_changing_on_the_same_torch_and_both_changing(engine: Engine) -> None:
    with session_scope(engine) as s:
        b = make_backend(s).id
        old, new = _torch(s, "2.13.0", A), _torch(s, "2.15.0", B)
        green = _run(s, b, old, THEIRS, tests={T1: "passed", T2: "passed"})
        now = _run(s, b, old, OURS, tests={T1: "failed"})
        f = _failure(now.id, T1, "fp-t1")
        verdict = triage(None, history_for(s, now, [f]).evidence(f))
        assert verdict.category is Category.BACKEND
        assert f"passed on run #{green.id} (torch 2.13.0 aaaaaaa, backend 1a2b3c4)" in verdict.reason

        later = _run(s, b, new, "c" * 40, tests={T2: "failed"})
        g = _failure(later.id, T2, "fp-t2")
        both = triage(None, history_for(s, later, [g]).evidence(g))
        assert both.category is Category.UNKNOWN and both.needs_isolation
        assert both.isolate_against_run_id == green.id  # where T2 last passed


def test_other_backends_and_later_runs_are_not_history(engine: Engine) -> None:
    with session_scope(engine) as s:
        mine, other = make_backend(s, "mine").id, make_backend(s, "other").id
        old = _torch(s, "2.13.0", A)
        _run(s, other, old, OURS, tests={T1: "passed"}, fails={None: "fp"})
        now = _run(s, mine, old, OURS, tests={T1: "failed"})
        _run(s, mine, old, OURS, tests={T1: "passed"}, fails={None: "fp"})
        failures = [_failure(now.id, T1, "fp-t1"), _failure(now.id, None, "fp")]
        history = history_for(s, now, failures)
        assert history.passed == {} and history.failed_before == {}
        verdict = triage(None, history.evidence(failures[0]))
        assert verdict.category is Category.UNKNOWN and verdict.isolate_against_run_id is None


def test_steps_modules_and_conformance_mechanisms(engine: Engine) -> None:
    with session_scope(engine) as s:
        b = make_backend(s).id
        old, new = _torch(s, "2.13.0", A), _torch(s, "2.15.0", B)
        good = _run(s, b, old, OURS, tests={"tests/test_mod.py::t": "passed"})
        s.add(ConformanceResult(run_id=good.id, device="d", mechanism="streams", level="required",
                                passed=3, failed=0, skipped=0, failing=[]))
        broken = _run(s, b, new, OURS, build="failed", fails={None: "fp-build"},
                      triaged="upstream")
        now = _run(s, b, new, OURS, build="failed")
        conformance = "suite/test_streams.py::test_wait"
        s.add(ConformanceResult(run_id=now.id, device="d", mechanism="streams", level="required",
                                passed=2, failed=1, skipped=0, failing=[conformance]))
        s.flush()
        build = _failure(now.id, None, "fp-build")
        module = _failure(now.id, "tests/test_mod.py", "fp-mod")
        mech = _failure(now.id, conformance, "fp-conf")
        history = history_for(s, now, [build, module, mech])
        ev = history.evidence(build)
        assert ev.passed is not None and ev.broke is not None
        assert (ev.passed.run_id, ev.broke.run_id) == (good.id, broken.id)
        assert [e.run_id for e in ev.failed_before] == [broken.id]
        assert triage(None, ev).category is Category.UPSTREAM
        for f in (module, mech):
            got = history.evidence(f)
            assert got.passed is not None and got.passed.run_id == good.id, f.nodeid
            assert got.broke is None
            assert triage(None, got).category is Category.UPSTREAM


def test_flaky_and_infra_failures_are_not_the_same_failure_before(engine: Engine) -> None:
    with session_scope(engine) as s:
        b = make_backend(s).id
        old = _torch(s, "2.13.0", A)
        _run(s, b, old, OURS, tests={T1: "flaky"}, fails={T1: "fp"}, triaged="flake")
        _run(s, b, old, OURS, build="failed", fails={None: "fp"}, triaged="infra")
        now = _run(s, b, old, OURS, tests={T1: "failed"})
        f = _failure(now.id, T1, "fp")
        assert history_for(s, now, [f]).evidence(f).failed_before == ()


def test_the_query_count_does_not_grow_with_failures_or_history(engine: Engine) -> None:
    def queries_for(nights: int, failing: int) -> int:
        with session_scope(engine) as s:
            b = make_backend(s, f"b{nights}-{failing}").id
            tb = _torch(s, f"2.{nights}.{failing}", A)
            names = [f"tests/test_x.py::t{i}" for i in range(failing)]
            for _ in range(nights):
                _run(s, b, tb, OURS, tests=dict.fromkeys(names, "passed"))
            now = _run(s, b, tb, OURS, tests=dict.fromkeys(names, "failed"))
            failures = [_failure(now.id, n, f"fp{i}") for i, n in enumerate(names)]
            failures.append(_failure(now.id, None, "fp-build"))
            s.flush()
            with counted(engine) as statements:
                history_for(s, now, failures)
            return len(statements)

    small, large = queries_for(2, 3), queries_for(6, 150)
    assert small == large <= 7, (small, large)
