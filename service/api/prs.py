"""/api/prs/{number}: one upstream PR, every backend's runs of its wheel and every
breakage that names it as a suspect (``service/queries/prs.py``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, status

from service.api.deps import ContextDep, SessionDep
from service.queries.prs import PrView, pr_view
from service.schemas import PrOut, PrRunOut, PrSuspicionOut, ReproOut

router = APIRouter(prefix="/api/prs", tags=["prs"])

# GitHub's PR numbers are positive; the bound keeps a query inside a 32-bit integer.
PrNumber = Annotated[int, Path(ge=1, le=2**31 - 1, description="The upstream PR's number")]


def pr_url(repo: str, number: int) -> str:
    return f"https://github.com/{repo}/pull/{number}"


def pr_document(view: PrView, repo: str) -> PrOut:
    return PrOut(
        number=view.number,
        title=view.title,
        url=view.url or pr_url(repo, view.number),
        backends=view.backends,
        runs=[PrRunOut.model_validate(r) for r in view.runs],
        suspicions=[PrSuspicionOut.model_validate(s) for s in view.suspicions],
        repro=[ReproOut(backend=r.backend, torch=r.torch, why=r.why, command=r.command)
               for r in view.repros],
        shas=view.shas,
    )


@router.get("/{number}", response_model=PrOut, summary="One upstream PR: its runs and suspicions")
def get_pr(number: PrNumber, session: SessionDep, ctx: ContextDep) -> PrOut:
    view = pr_view(session, number)
    if view is None:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND,
            f"PR #{number}: ootci never ran its wheel nor suspected it of a breakage",
        )
    return pr_document(view, ctx.settings.upstream_repo)
