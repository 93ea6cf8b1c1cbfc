"""Which breakages the loop verifies next: ranked open upstream ones with a range base,
not verified yet and not being verified."""

from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.models import CulpritVerification
from tests.support.factories import make_backend, make_breakage, make_run
from workers.jobs.verify import VERIFY, pending

SUSPECT = {"sha": "a" * 40, "pr": 1, "title": "t", "score": 0.9, "reasons": []}


def test_pending_takes_ranked_unverified_upstream_breakages_only(engine: Engine) -> None:
    with Session(engine) as s:
        backend = make_backend(s)
        runs = [make_run(s, backend, state="failed") for _ in range(6)]
        ranked = dict(culprits=[SUSPECT], range_base_sha="b" * 40)
        awaiting = make_breakage(s, backend, runs[0], **ranked)
        make_breakage(s, backend, runs[1], range_base_sha="b" * 40)  # not ranked yet
        make_breakage(s, backend, runs[2], category="backend", **ranked)  # not upstream's
        done = make_breakage(s, backend, runs[3], **ranked)
        s.add(CulpritVerification(breakage_id=done.id, sha="a" * 40, pr=1, state="refuted",
                                  run_id=None, evidence="still fails"))
        running = make_breakage(s, backend, runs[4], **ranked)
        make_run(s, backend, spec="path:/o", trigger=VERIFY, state="running",
                 trigger_info={"breakage_id": running.id})
        other = make_breakage(s, backend, runs[5], **ranked)
        s.commit()
        assert pending(s) == [(awaiting.id, runs[0].id), (other.id, runs[5].id)]
        assert pending(s, opened_by=runs[5].id) == [(other.id, runs[5].id)]
