"""The audit log page: every write, who made it, when, on what."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import HTMLResponse

from service.api.deps import SessionDep
from service.api.templates import render
from service.queries import audit as q

router = APIRouter()
PER_PAGE = 100


@router.get("/audit", response_class=HTMLResponse, name="dash_audit")
def audit_page(
    request: Request, session: SessionDep,
    before: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
) -> HTMLResponse:
    rows = q.audit_log(session, limit=PER_PAGE, before=before)
    older = rows[-1].id if len(rows) == PER_PAGE else None
    return render(request, "audit.html", {"page_title": "Audit log", "rows": rows,
                                          "older": older})
