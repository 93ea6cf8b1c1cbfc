"""Rows of a red nightly whose breakage awaits its culprit analysis: the build failed as
the culprit corpus case ``allocate-const`` says, after a green night (both on the
``nightly`` track, with the case's base and head shas as their torch's git_version)."""

from __future__ import annotations

import json

from sqlalchemy.orm import Session

from evals.paths import CULPRIT_CASES
from service.commands import culprits
from service.models import Breakage, Failure, Run, RunState, TorchBuild
from service.queries.regression import range_for
from tests.support.helpers import add_backend

CASE = CULPRIT_CASES / "allocate-const.json"
REPO = "pytorch/pytorch"


def breakage_with_range(session: Session, base: str, head: str) -> Breakage:
    """A red nightly whose build failed as the case's evidence says, after a green one."""
    case = json.loads(CASE.read_text())
    backend = add_backend(session)
    runs = []
    for git, state in ((base, RunState.PASSED), (head, RunState.FAILED)):
        build = TorchBuild(spec="nightly", source_kind="nightly", version=f"2.14.0.dev+{git[:6]}",
                           git_version=git)
        session.add(build)
        session.flush()
        run = Run(backend_id=backend.id, torch_spec="nightly", torch_build_id=build.id, state=state)
        session.add(run)
        session.flush()
        session.refresh(run)
        runs.append(run)
    finding = case["evidence"][0]["finding"]
    breakage = Breakage(backend_id=backend.id, fingerprint=finding["fingerprint"], fingerprint_version=2,
                        category="upstream", subtype=finding["subtype"], title="signature-changed: allocate",
                        first_seen_run_id=runs[1].id, last_seen_run_id=runs[1].id, occurrences=1)
    session.add(breakage)
    session.flush()
    session.add(Failure(run_id=runs[1].id, step_name="build", stage="build", line=finding["line"],
                        captures=finding["captures"], category="upstream", subtype=finding["subtype"],
                        fingerprint=finding["fingerprint"], finding=finding, breakage_id=breakage.id))
    culprits.after_run(session, runs[1], [breakage], [], found=range_for(session, runs[1]),
                       repo=REPO, min_score=0.5)
    session.commit()
    return breakage
