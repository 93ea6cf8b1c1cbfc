"""Many workers first-sight one shared row at the same moment: one row, no error.

Real threads, each with its own connection, released together by a barrier, on a fresh
SQLite file and on a fresh Postgres database (the ``engine`` fixture runs both).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from service.commands.breakages import record_occurrences
from service.commands.runs import get_or_create_backend
from service.commands.torch_builds import record_torch_build
from service.db import session_scope
from service.models import Backend, Breakage, Failure, Run, TorchBuild
from tests.support.factories import make_backend, make_finished_run

RACERS = 12


def _race(engine: Engine, work: Callable[[Session, int], None]) -> list[BaseException]:
    """Run ``work`` in RACERS threads released together; the errors they raised."""
    barrier = threading.Barrier(RACERS)
    errors: list[BaseException] = []

    def racer(index: int) -> None:
        try:
            with session_scope(engine) as s:
                s.connection()  # connect before the barrier: the inserts themselves race
                barrier.wait()
                work(s, index)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(RACERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return errors


def test_concurrent_first_sights_of_a_torch_build_make_one_row(engine: Engine) -> None:
    ids: list[int] = []

    def provision(s: Session, index: int) -> None:
        row = record_torch_build(
            s, spec="nightly", source_kind="nightly", version="2.14.0.dev20261126",
            git_version="a" * 40, env_key=f"env{index}", python="/envs/x/bin/python",
        )
        ids.append(row.id)

    assert _race(engine, provision) == []
    with session_scope(engine) as s:
        assert s.scalar(select(func.count()).select_from(TorchBuild)) == 1
        assert set(ids) == {s.scalars(select(TorchBuild.id)).one()}


def test_concurrent_registrations_of_a_backend_make_one_row(engine: Engine) -> None:
    def register(s: Session, index: int) -> None:
        get_or_create_backend(s, "openreg", f"/src/{index}")

    assert _race(engine, register) == []
    with session_scope(engine) as s:
        assert s.scalars(select(Backend.name)).all() == ["openreg"]


def test_concurrent_runs_first_sighting_a_breakage_make_one_with_every_occurrence(
    engine: Engine,
) -> None:
    with session_scope(engine) as s:
        backend = make_backend(s)
        run_ids = [make_finished_run(s, backend).id for _ in range(RACERS)]

    def record(s: Session, index: int) -> None:
        run = s.get_one(Run, run_ids[index])
        failure = Failure(
            run_id=run.id, step_name="build", stage="build", line="error: no member",
            category="api", subtype="signature-changed", fingerprint="f" * 16,
            fingerprint_version=1, triage="upstream",
        )
        s.add(failure)
        record_occurrences(s, run, [failure])

    assert _race(engine, record) == []
    with session_scope(engine) as s:
        breakage = s.scalars(select(Breakage)).one()
        assert breakage.occurrences == RACERS
        linked = s.scalars(select(Failure.breakage_id)).all()
        assert linked == [breakage.id] * RACERS
