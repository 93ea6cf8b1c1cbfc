"""A culprit verification's overlay torch is an experiment, not a matrix target."""

from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.queries.matrix import latest_targets
from tests.support.factories import make_backend, make_run, make_torch_build


def test_verify_runs_are_not_matrix_targets(engine: Engine) -> None:
    with Session(engine) as s:
        backend = make_backend(s)
        red = make_torch_build(s, "a" * 40)
        undone = make_torch_build(s, "a" * 40 + "-undo-9c384d5049ce", spec="path:/o", source_kind="path")
        make_run(s, backend, torch_build_id=red.id, state="failed")
        make_run(s, backend, spec="path:/o", torch_build_id=undone.id, state="passed", trigger="verify")
        s.commit()
        assert [t.torch_build_id for t in latest_targets(s)] == [red.id]
