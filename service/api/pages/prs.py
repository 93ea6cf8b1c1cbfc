"""One upstream PR's page: every backend's runs of its wheel, the breakages naming it as a
suspect, the repro commands, and (for a triager) the dispute form per breakage."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import HTMLResponse

from service.api.auth import session_identity
from service.api.deps import ContextDep, SessionDep
from service.api.prs import PrNumber, pr_url
from service.api.templates import render
from service.domain.roles import Role
from service.queries.prs import pr_view

router = APIRouter()


@router.get("/prs/{number}", response_class=HTMLResponse, name="dash_pr")
def pr_page(request: Request, session: SessionDep, ctx: ContextDep, number: PrNumber) -> HTMLResponse:
    view = pr_view(session, number)
    if view is None:
        return render(request, "not_found.html", {
            "page_title": "Not found",
            "what": f"PR #{number} (ootci never ran its wheel nor suspected it)"}, 404)
    me = session_identity(request)
    return render(request, "pr.html", {
        "page_title": f"PR #{number}",
        "pr": view,
        "github_url": view.url or pr_url(ctx.settings.upstream_repo, number),
        # The dispute route (POST /breakages/{id}/dispute) takes a triager's session.
        "dispute_as": me if me is not None and me.may(Role.TRIAGER) else None,
    })
