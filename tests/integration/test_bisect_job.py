"""The bisection job over real databases: a red nightly whose breakage opened several
nights after the last green one gets a bisection instead of a ranking; each call of the
job records the probe runs that finished and queues the next; an errored probe is run
once more, then skipped; a night missing from the index is skipped; an unrelated failure
does not make a night red; at the end the breakage's range, its ranking request and
``range_for`` (``ootci culprit``) are the narrowed range's. The probe runs are finished
here by hand: ``test_bisect_nightlies.py`` runs them for real."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from service.commands import culprits
from service.models import (
    Bisection,
    Breakage,
    Failure,
    OutboxKind,
    OutboxMessage,
    Run,
    RunState,
)
from service.queries.regression import range_for
from tests.support.factories import make_backend, make_breakage, make_run, make_torch_build
from workers.jobs.bisect import advance

REPO = "pytorch/pytorch"
FP = "fp-allocate-const"


def version(day: int) -> str:
    return f"2.14.0.dev202611{day:02d}+cpu"


def sha(day: int) -> str:
    return f"{day:02d}" * 20


def night(day: int) -> dt.date:
    return dt.date(2026, 11, day)


def _red_after_gap(session: Session, first: int, last: int, name: str = "vendor") -> Breakage:
    """Green on ``first``'s nightly, red on ``last``'s; the breakage opened by the red run."""
    backend = make_backend(session, name)
    runs = []
    for day, state in ((first, RunState.PASSED), (last, RunState.FAILED)):
        build = make_torch_build(session, sha(day), version=version(day))
        runs.append(make_run(session, backend, torch_build_id=build.id, state=state,
                             backend_sha="c" * 40))
    breakage = make_breakage(session, backend, runs[1], fingerprint=FP)
    session.add(Failure(run_id=runs[1].id, step_name="test", stage="test",
                        nodeid="tests/test_alloc.py::test_allocate", line="TypeError",
                        fingerprint=FP, breakage_id=breakage.id, triage="upstream"))
    culprits.after_run(session, runs[1], [breakage], [], found=range_for(session, runs[1]),
                       repo=REPO, min_score=0.5)
    session.commit()
    return breakage


def _finish(session: Session, run_id: int, state: RunState, *, day: int,
            failures: tuple[tuple[str, str, str], ...] = ()) -> None:
    """End a probe run as the pipeline would: its torch, its state, its failures."""
    run = session.get_one(Run, run_id)
    run.torch_build_id = make_torch_build(session, sha(day), version=version(day)).id
    run.state = state
    run.error_kind = "infra" if state is RunState.ERRORED else None
    for fingerprint, nodeid, stage in failures:
        session.add(Failure(run_id=run_id, step_name=stage, stage=stage, nodeid=nodeid,
                            line="x", fingerprint=fingerprint, triage="upstream"))
    session.commit()


def _analyses(session: Session) -> list[OutboxMessage]:
    return list(session.scalars(select(OutboxMessage).where(
        OutboxMessage.kind == OutboxKind.CULPRIT)))


def _probe(session: Session, run_ids: list[int]) -> Run:
    (run_id,) = run_ids
    return session.get_one(Run, run_id)


def test_a_gap_is_bisected_around_errors_missing_nights_and_unrelated_failures(
    engine: Engine,
) -> None:
    # Nights 1..9 (days 1..9), night 5 missing from the index; nights 4 on are red.
    on_index: Collection[dt.date] = {night(d) for d in range(1, 10)} - {night(5)}
    with Session(engine) as session:
        breakage = _red_after_gap(session, 1, 9)
        assert _analyses(session) == []  # no ranking of eight nights of commits
        assert "bisecting the 7 nightlies" in (breakage.culprits_note or "")

        first = _probe(session, advance(session, lambda: on_index))
        session.commit()
        # The middle night is the missing one: its neighbour nearest the middle goes first.
        assert (first.torch_spec, first.trigger, first.state) == ("nightly:2026-11-04", "bisect", "queued")
        assert first.backend_sha == "c" * 40  # only the torch differs from the red run
        assert first.trigger_info["failed_tests"] == ["tests/test_alloc.py::test_allocate"]
        # Unfinished: nothing new is queued.
        assert advance(session, lambda: on_index) == []

        _finish(session, first.id, RunState.ERRORED, day=4)
        retry = _probe(session, advance(session, lambda: on_index))
        session.commit()
        assert retry.torch_spec == "nightly:2026-11-04" and retry.id != first.id
        _finish(session, retry.id, RunState.ERRORED, day=4)
        # Night 4 errored twice: skipped, and the search goes on next to it.
        third = _probe(session, advance(session, lambda: on_index))
        session.commit()
        assert third.torch_spec == "nightly:2026-11-06"
        _finish(session, third.id, RunState.FAILED, day=6,
                failures=((FP, "tests/test_alloc.py::test_allocate", "test"),))
        fourth = _probe(session, advance(session, lambda: on_index))
        session.commit()
        assert fourth.torch_spec == "nightly:2026-11-03"
        # An unrelated test failing on night 3 does not make it red.
        _finish(session, fourth.id, RunState.FAILED, day=3,
                failures=(("fp-other", "tests/test_other.py::test_x", "test"),))
        assert advance(session, lambda: on_index) == []
        session.commit()

        bisection = session.scalars(select(Bisection)).one()
        assert bisection.state == "partial"  # nights 4 and 5 are left between 3 and 6
        assert [(p.spec, p.result) for p in bisection.probes] == [
            ("nightly:2026-11-05", "skipped"),
            ("nightly:2026-11-04", "error"),
            ("nightly:2026-11-04", "error"),
            ("nightly:2026-11-06", "red"),
            ("nightly:2026-11-03", "green"),
        ]
        session.refresh(breakage)
        assert (breakage.range_base_sha, breakage.range_head_sha) == (sha(3), sha(6))
        assert (breakage.range_base_version, breakage.range_head_version) == (version(3), version(6))
        (analysis,) = _analyses(session)
        assert analysis.payload == {"breakage_id": breakage.id}
        red_run = session.get_one(Run, breakage.first_seen_run_id)
        found = range_for(session, red_run)
        assert (found.base.git_version if found.base else None, found.head.git_version) == (sha(3), sha(6))
        assert advance(session, lambda: on_index) == []  # done: nothing more


def test_a_red_night_next_to_the_green_one_narrows_to_adjacent_nights(engine: Engine) -> None:
    with Session(engine) as session:
        breakage = _red_after_gap(session, 1, 5)
        on_index = {night(d) for d in range(1, 6)}
        probes = []
        for _ in range(5):
            queued = advance(session, lambda: on_index)
            session.commit()
            if not queued:
                break
            run = _probe(session, queued)
            day = int(run.torch_spec[-2:])
            probes.append(day)
            _finish(session, run.id, RunState.FAILED, day=day,
                    failures=((FP, "tests/test_alloc.py::test_allocate", "test"),))
        assert probes == [3, 2]  # at most two probes for the three nights in between
        bisection = session.scalars(select(Bisection)).one()
        assert bisection.state == "narrowed"
        session.refresh(breakage)
        assert (breakage.range_base_sha, breakage.range_head_sha) == (sha(1), sha(2))
        assert "bisection: narrowed to 2026-11-01 (green) .. 2026-11-02 (red)" in (breakage.culprits_note or "")


def test_an_unreadable_index_decides_nothing_and_a_one_night_range_is_not_bisected(
    engine: Engine,
) -> None:
    with Session(engine) as session:
        _red_after_gap(session, 1, 5)
        assert advance(session, lambda: None) == []
        session.commit()
        assert session.scalars(select(Bisection)).one().state == "running"
        assert session.scalars(select(Run).where(Run.trigger == "bisect")).all() == []

    with Session(engine) as session:
        # Adjacent nights: ranked at once, as before.
        breakage = _red_after_gap(session, 11, 12, name="other")
        assert session.scalars(select(Bisection).where(
            Bisection.breakage_id == breakage.id)).all() == []
        assert [m.payload for m in _analyses(session)] == [{"breakage_id": breakage.id}]
        assert session.scalars(select(Run).where(Run.trigger == "bisect")).all() == []
