"""Trends: breakages opened/resolved per week and pass rate per backend, as inline SVG."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import HTMLResponse

from service.api.deps import SessionDep
from service.api.templates import render
from service.domain import charts
from service.queries import trends as trend_queries

router = APIRouter()


@router.get("/trends", response_class=HTMLResponse, name="dash_trends")
def trends_page(
    request: Request, session: SessionDep, weeks: Annotated[int, Query(ge=2, le=104)] = 26
) -> HTMLResponse:
    data = trend_queries.trends(session, weeks=weeks)
    labels = [w.strftime("%m-%d") for w in data.weeks]
    breakage_chart = charts.bar_chart(
        labels,
        [charts.Series("opened", [float(v) for v in data.opened]),
         charts.Series("resolved", [float(v) for v in data.resolved])],
        title="Breakages opened and resolved per week",
        y_label="breakages",
    )
    pass_chart = charts.line_chart(
        labels,
        [charts.Series(name, rates) for name, rates in data.pass_rate.items()],
        title="Pass rate per backend per week",
        y_label="runs passed",
        y_max=1.0,
        percent=True,
    )
    return render(request, "trends.html", {
        "page_title": "Trends",
        "data": data,
        "labels": labels,
        "breakage_chart": breakage_chart,
        "pass_chart": pass_chart,
        "weeks": weeks,
    })
