"""Search by test name, symbol, header or error text, and by identifier: an upstream PR
number, a torch commit sha or a torch version."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import HTMLResponse

from service.api.deps import SessionDep
from service.api.templates import render
from service.queries import search as search_queries
from service.queries import search_ids

router = APIRouter()

MIN_QUERY = 2


@router.get("/search", response_class=HTMLResponse, name="dash_search")
def search_page(
    request: Request,
    session: SessionDep,
    q: Annotated[str, Query(max_length=200, pattern=r"^[^\x00]*$")] = "",
) -> HTMLResponse:
    q = q.strip()
    results = search_queries.search(session, q) if len(q) >= MIN_QUERY else None
    ids = search_ids.find_ids(session, q) if len(q) >= MIN_QUERY else None
    return render(request, "search.html", {
        "page_title": f"Search: {q}" if q else "Search",
        "q": q,
        "results": results,
        "ids": ids,
        "min_query": MIN_QUERY,
    })
