"""Breakages: the list (open first) and one breakage with its history and first evidence."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import HTMLResponse

from service.api.deps import ContextDep, SessionDep
from service.api.pages.runs import evidence
from service.api.params import BreakageId
from service.api.templates import render
from service.documents import bisection_out, breakage_culprits
from service.domain.pr_comment import unreported_reason
from service.queries import breakages as queries
from service.queries import runs as run_queries
from service.queries import verifications as verification_queries
from service.queries.runs import backend_names

router = APIRouter()

PER_PAGE = 50
Choice = Annotated[str | None, Query(max_length=100, pattern=r"^[^\x00]*$")]


@router.get("/breakages", response_class=HTMLResponse, name="dash_breakages")
def breakages_page(
    request: Request,
    session: SessionDep,
    ctx: ContextDep,
    status: Choice = None,
    backend: Choice = None,
    category: Choice = None,
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
) -> HTMLResponse:
    filters = queries.BreakageFilters(status=status or None, backend=backend or None,
                                      category=category or None)
    found = queries.list_breakages(session, filters, limit=PER_PAGE,
                                   offset=(page - 1) * PER_PAGE)
    first_targets = run_queries.target_labels(
        session, {b.first_seen_run_id for b in found.breakages if b.first_seen_run_id})
    return render(request, "breakages.html", {
        "page_title": "Breakages",
        "found": found,
        "first_targets": first_targets,
        "filters": filters,
        "all_backends": run_queries.backend_list(session),
        "page": page,
        "pages": max(1, -(-found.total // PER_PAGE)),
        "github_repo": ctx.settings.upstream_repo,
    })


@router.get("/breakages/{breakage_id}", response_class=HTMLResponse, name="dash_breakage")
def breakage_page(
    request: Request, session: SessionDep, ctx: ContextDep, breakage_id: BreakageId
) -> HTMLResponse:
    breakage = queries.get_breakage(session, breakage_id)
    if breakage is None:
        return render(request, "not_found.html",
                      {"page_title": "Not found", "what": f"breakage {breakage_id}"}, 404)
    first = queries.first_evidence(session, breakage.id)
    labels = run_queries.target_labels(session, {
        i for i in (breakage.first_seen_run_id, breakage.last_seen_run_id,
                    breakage.resolved_by_run_id) if i})
    return render(request, "breakage.html", {
        "page_title": f"Breakage {breakage.id}",
        "b": breakage,
        "backend": backend_names(session, {breakage.backend_id}).get(breakage.backend_id, "?"),
        "history": queries.occurrences(session, breakage.id, limit=200),
        "first": first,
        "first_evidence": evidence(first) if first else None,
        "labels": labels,
        "github_repo": ctx.settings.upstream_repo,
        "culprits": breakage_culprits(session, breakage, ctx.settings.upstream_repo),
        "bisection": bisection_out(session, breakage.id),
        "unreported": unreported_reason(breakage.culprits, ctx.settings.culprit_min_score),
        # Culprit verification (issue #29): each suspect undone, its run and logs.
        "verifications": verification_queries.of_breakage(session, breakage.id),
    })
