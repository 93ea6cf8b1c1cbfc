"""Per contract test: its outcome across the latest targets, per backend."""

from __future__ import annotations

from collections import defaultdict
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import HTMLResponse

from service.api.deps import SessionDep
from service.api.templates import render
from service.queries import dashboard

router = APIRouter()

NodeidQuery = Annotated[str | None, Query(max_length=1000, pattern=r"^[^\x00]*$")]
Last = Annotated[int, Query(ge=1, le=500)]


def _history(request: Request, session: SessionDep, nodeid: str, last: int) -> HTMLResponse:
    entries = dashboard.history_of_test(session, nodeid, limit=last)
    per_backend: dict[str, list[dashboard.HistoryEntry]] = defaultdict(list)
    for entry in entries:
        per_backend[entry.backend].append(entry)
    failing = sum(1 for e in entries if e.outcome in ("failed", "error", "crashed"))
    return render(request, "test_history.html", {
        "page_title": nodeid,
        "nodeid": nodeid,
        "entries": entries,
        "per_backend": dict(sorted(per_backend.items())),
        "failing": failing,
        "last": last,
    }, 200 if entries else 404)


@router.get("/tests", response_class=HTMLResponse, name="dash_tests")
def tests_page(
    request: Request, session: SessionDep, nodeid: NodeidQuery = None, q: NodeidQuery = None,
    last: Last = 60,
) -> HTMLResponse:
    if nodeid:
        return _history(request, session, nodeid, last)
    known = dashboard.known_nodeids(session, q or "", limit=1000)
    suites: dict[str, list[str]] = defaultdict(list)
    for n in known:
        suites[n.split("::", 1)[0]].append(n)
    return render(request, "tests.html", {
        "page_title": "Contract tests", "suites": dict(suites), "q": q or "", "count": len(known),
    })


@router.get("/tests/{nodeid:path}", response_class=HTMLResponse, name="dash_test_history")
def test_history_page(
    request: Request, session: SessionDep, nodeid: str, last: Last = 60
) -> HTMLResponse:
    return _history(request, session, nodeid, last)
