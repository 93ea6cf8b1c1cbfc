"""/pins: the weekly pin reports, newest week first, with the history of past weeks."""

from __future__ import annotations

from itertools import groupby
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import HTMLResponse

from service.api.deps import SessionDep
from service.api.templates import render
from service.queries.pin_reports import reports

router = APIRouter()


@router.get("/pins", response_class=HTMLResponse, name="dash_pins")
def pins_page(
    request: Request, session: SessionDep, weeks: Annotated[int, Query(ge=1, le=52)] = 4
) -> HTMLResponse:
    rows = reports(session, weeks=weeks)
    by_week = [
        (week, [report.view(name) for report, name in group])
        for week, group in groupby(rows, key=lambda row: row[0].week)
    ]
    return render(request, "pins.html", {"page_title": "Pins", "by_week": by_week, "weeks": weeks})
