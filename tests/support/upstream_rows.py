"""Rows of a red nightly whose breakage awaits its culprit analysis: the build failed as
the culprit corpus case ``allocate-const`` says, after a green night (both on the
``nightly`` track, with the case's base and head shas as their torch's git_version)."""

from __future__ import annotations

import json

from sqlalchemy.orm import Session

from evals.paths import CULPRIT_CASES
from service.commands import culprits
from service.models import Breakage, Failure, RunState
from service.queries.regression import range_for
from tests.support.factories import make_backend, make_breakage, make_run, make_torch_build

CASE = CULPRIT_CASES / "allocate-const.json"
REPO = "pytorch/pytorch"


def breakage_with_range(session: Session, base: str, head: str) -> Breakage:
    """A red nightly whose build failed as the case's evidence says, after a green one."""
    case = json.loads(CASE.read_text())
    backend = make_backend(session)
    runs = []
    for git, state in ((base, RunState.PASSED), (head, RunState.FAILED)):
        build = make_torch_build(session, git, version=f"2.14.0.dev+{git[:6]}")
        runs.append(make_run(session, backend, torch_build_id=build.id, state=state))
    finding = case["evidence"][0]["finding"]
    breakage = make_breakage(session, backend, runs[1], fingerprint=finding["fingerprint"],
                             fingerprint_version=2, subtype=finding["subtype"],
                             title="signature-changed: allocate")
    session.add(Failure(run_id=runs[1].id, step_name="build", stage="build", line=finding["line"],
                        captures=finding["captures"], category="upstream", subtype=finding["subtype"],
                        fingerprint=finding["fingerprint"], finding=finding, breakage_id=breakage.id))
    culprits.after_run(session, runs[1], [breakage], [], found=range_for(session, runs[1]),
                       repo=REPO, min_score=0.5)
    session.commit()
    return breakage
