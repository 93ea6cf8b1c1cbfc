"""Per contract test: its outcome across the latest targets, per backend."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import HTMLResponse

from service.api.deps import SessionDep
from service.api.templates import render
from service.models import Outcome
from service.queries import tests as test_queries

router = APIRouter()

NodeidQuery = Annotated[str | None, Query(max_length=1000, pattern=r"^[^\x00]*$")]
Last = Annotated[int, Query(ge=1, le=200, description="How many torch targets")]
# Pins are re-run every night, so a target's results are several runs deep: read this many
# results per target asked for (bounded: one indexed query, newest first).
RESULTS_PER_TARGET = 12
MAX_RESULTS = 2000


@dataclass(frozen=True)
class TargetRow:
    target: str
    kind: str  # nightly | pin
    cells: dict[str, test_queries.HistoryEntry]  # backend -> its latest result on this target


def by_target(entries: list[test_queries.HistoryEntry], last: int) -> list[TargetRow]:
    """Newest target first; per backend the latest result on it (entries are newest first)."""
    rows: dict[str, TargetRow] = {}
    for e in entries:
        row = rows.get(e.target)
        if row is None:
            if len(rows) == last:
                continue
            row = rows[e.target] = TargetRow(e.target, "nightly" if ".dev" in e.target else "pin",
                                             {})
        row.cells.setdefault(e.backend, e)
    return list(rows.values())


def _history(request: Request, session: SessionDep, nodeid: str, last: int) -> HTMLResponse:
    entries = test_queries.history_of_test(
        session, nodeid, limit=min(MAX_RESULTS, last * RESULTS_PER_TARGET))
    failing = sum(1 for e in entries if e.outcome in Outcome.FAILING)
    return render(request, "test_history.html", {
        "page_title": nodeid,
        "nodeid": nodeid,
        "entries": entries,
        "rows": by_target(entries, last),
        "backends": sorted({e.backend for e in entries}),
        "failing": failing,
        "last": last,
    }, 200 if entries else 404)


@router.get("/tests", response_class=HTMLResponse, name="dash_tests")
def tests_page(
    request: Request, session: SessionDep, nodeid: NodeidQuery = None, q: NodeidQuery = None,
    last: Last = 30,
) -> HTMLResponse:
    if nodeid:
        return _history(request, session, nodeid, last)
    known = test_queries.known_nodeids(session, q or "", limit=1000)
    suites: dict[str, list[str]] = defaultdict(list)
    for n in known:
        suites[n.split("::", 1)[0]].append(n)
    return render(request, "tests.html", {
        "page_title": "Contract tests", "suites": dict(suites), "q": q or "", "count": len(known),
    })


@router.get("/tests/{nodeid:path}", response_class=HTMLResponse, name="dash_test_history")
def test_history_page(
    request: Request, session: SessionDep, nodeid: str, last: Last = 30
) -> HTMLResponse:
    return _history(request, session, nodeid, last)
