"""A snoozed breakage in the matrix (issue #30 item 2): its failures' cells are shown with
their verdict but muted, not red; a cell with one failure of a breakage nobody snoozed
stays red."""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.api.pages.cells import FailureFact, RunFacts, build_cell
from service.api.pages.matrix import Row, row_cells_html
from service.models import Failure, RunState, utcnow
from service.queries.stages import stage_facts
from tests.support.factories import make_backend, make_breakage, make_run

HEADER = FailureFact("build", "upstream", "header-moved", None, "fatal error: x.h: No such file")
RED_BUILD = {"provision": "passed", "build": "failed", "test": "skipped"}


def _run(*failures: FailureFact) -> RunFacts:
    return RunFacts(run_id=7, state="failed", verdict="upstream", verdict_subtype=None,
                    steps=RED_BUILD, failures=list(failures), suite_counts={}, suite_of={})


def test_a_cell_of_only_snoozed_failures_is_muted_and_says_so() -> None:
    muted = build_cell(_run(dataclasses.replace(HEADER, muted=True)))
    assert (muted.verdict, muted.muted) == ("upstream", True) and "(snoozed)" in muted.title
    html = row_cells_html(Row("2.14", "nightly", 1, {("acme", "build"): muted}, True),
                          [("acme", "build")], "/runs/")
    assert 'class="cell v-upstream first muted-cell"' in html
    assert 'data-verdict="upstream"' in html  # the verdict is still shown
    mixed = build_cell(_run(dataclasses.replace(HEADER, muted=True), HEADER))
    assert not mixed.muted
    assert "muted-cell" not in row_cells_html(
        Row("2.14", "nightly", 1, {("acme", "build"): mixed}, True), [("acme", "build")], "/r/")


def test_stage_facts_mark_the_failures_of_a_snoozed_breakage(engine: Engine) -> None:
    with Session(engine) as s:
        backend = make_backend(s)
        run = make_run(s, backend, state=RunState.FAILED, git="c" * 40)
        snoozed = make_breakage(s, backend, run, fingerprint="a",
                                snoozed_until=utcnow() + dt.timedelta(days=1))
        lapsed = make_breakage(s, backend, run, fingerprint="b",
                               snoozed_until=utcnow() - dt.timedelta(days=1))
        for b in (snoozed, lapsed, None):
            s.add(Failure(run_id=run.id, step_name="build", stage="build", line="error",
                          breakage_id=b.id if b else None, triage="upstream"))
        s.flush()
        facts = stage_facts(s, {run.id})
        assert [f[-1] for f in facts.failures[run.id]] == [True, False, False]
