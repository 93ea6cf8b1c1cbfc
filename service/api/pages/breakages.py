"""Breakages: the list (open first) and one breakage with its history and first evidence,
and, for logged-in triagers, the forms of the triage actions (note, link, snooze, dispute,
close, reopen), posted to ``/breakages/{id}/<action>`` with the session's CSRF field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Query, Request, status
from starlette.responses import HTMLResponse, RedirectResponse

from service.api.auth import Identity, require_role
from service.api.breakages import dispute_action, run_action
from service.api.deps import ContextDep, SessionDep
from service.api.pages.runs import evidence
from service.api.params import MAX_ID, NO_NUL, BreakageId
from service.api.templates import render
from service.commands import triage_actions as act
from service.documents import bisection_out, breakage_culprits, breakage_triage
from service.domain.pr_comment import unreported_reason
from service.domain.roles import Role
from service.models import Breakage, utcnow
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
        "triage": breakage_triage(breakage, utcnow()),
    })


# --- the triage forms --------------------------------------------------------------------
# Declared before the form fields, so the CSRF check reads the form first.
Triager = Annotated[Identity, Depends(require_role(Role.TRIAGER))]
Reason = Annotated[str, Form(max_length=1000, pattern=NO_NUL)]


def _act(request: Request, session: SessionDep, breakage_id: int,
         do: Callable[[], Breakage]) -> RedirectResponse:
    run_action(session, do)
    return RedirectResponse(str(request.url_for("dash_breakage", breakage_id=breakage_id)),
                            status.HTTP_303_SEE_OTHER)


@router.post("/breakages/{breakage_id}/note", name="dash_breakage_note")
def note_form(request: Request, session: SessionDep, breakage_id: BreakageId, who: Triager,
              note: Annotated[str, Form(max_length=4000, pattern=NO_NUL)] = "") -> RedirectResponse:
    return _act(request, session, breakage_id,
                lambda: act.set_note(session, breakage_id, note, actor=who.actor))


@router.post("/breakages/{breakage_id}/link", name="dash_breakage_link")
def link_form(request: Request, session: SessionDep, breakage_id: BreakageId, who: Triager,
              url: Annotated[str, Form(min_length=1, max_length=500, pattern=NO_NUL)],
              ) -> RedirectResponse:
    return _act(request, session, breakage_id,
                lambda: act.add_link(session, breakage_id, url, actor=who.actor))


@router.post("/breakages/{breakage_id}/snooze", name="dash_breakage_snooze")
def snooze_form(request: Request, session: SessionDep, breakage_id: BreakageId, who: Triager,
                until: Annotated[str, Form(max_length=40, pattern=NO_NUL)] = "",
                torch: Annotated[str, Form(max_length=100, pattern=NO_NUL)] = "",
                reason: Reason = "") -> RedirectResponse:
    return _act(request, session, breakage_id,
                lambda: act.snooze(session, breakage_id, until=until or None,
                                   torch=torch or None, reason=reason, actor=who.actor))


@router.post("/breakages/{breakage_id}/dispute", name="dash_breakage_dispute")
def dispute_form(request: Request, session: SessionDep, ctx: ContextDep,
                 breakage_id: BreakageId, who: Triager,
                 pr: Annotated[int, Form(ge=1, le=MAX_ID)],
                 reason: Annotated[str, Form(min_length=1, max_length=1000, pattern=NO_NUL)],
                 ) -> RedirectResponse:
    return _act(request, session, breakage_id,
                dispute_action(session, ctx.settings, breakage_id, pr, reason, who.actor))


@router.post("/breakages/{breakage_id}/close", name="dash_breakage_close")
def close_form(request: Request, session: SessionDep, breakage_id: BreakageId, who: Triager,
               reason: Reason = "") -> RedirectResponse:
    return _act(request, session, breakage_id,
                lambda: act.close(session, breakage_id, reason, actor=who.actor))


@router.post("/breakages/{breakage_id}/reopen", name="dash_breakage_reopen")
def reopen_form(request: Request, session: SessionDep, breakage_id: BreakageId, who: Triager,
                reason: Reason = "") -> RedirectResponse:
    return _act(request, session, breakage_id,
                lambda: act.reopen(session, breakage_id, reason, actor=who.actor))
