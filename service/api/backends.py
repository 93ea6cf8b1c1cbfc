"""/api/backends: the backend registry. Reading is open; registering and removing take the
token, like every write. Only git sources register here: a directory on the workers is the
operator's to name (``ootci backend add --path``)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status

from service.api.auth import TriagerDep
from service.api.deps import ContextDep, SessionDep
from service.commands.audit import audit
from service.commands.backends import BackendNameTaken, add_backend, remove_backend
from service.documents import backend_list, backend_out
from service.schemas import BackendOut, BackendRequest, Problem
from service.sources import (
    SourceUnreachable,
    check_source,
    is_git_url,
    subdir_problem,
    without_userinfo,
)

router = APIRouter(prefix="/api/backends", tags=["backends"])


@router.get("", response_model=list[BackendOut], summary="The registered backends")
def list_backends(session: SessionDep) -> list[BackendOut]:
    return backend_list(session)


@router.get(
    "/{name}", response_model=BackendOut, summary="One registered backend and its changes",
    responses={404: {"model": Problem, "description": "Not registered"}},
)
def show_backend(session: SessionDep, name: str) -> BackendOut:
    found = backend_out(session, name)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"backend {name!r} is not registered")
    return found


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=BackendOut,
    responses={
        401: {"model": Problem, "description": "Missing or wrong bearer token"},
        403: {"model": Problem, "description": "The token's role is below triager"},
        409: {"model": Problem, "description": "The name is registered from another source"},
        422: {"model": Problem, "description": "Not a git URL, or the repository or ref "
              "cannot be read (nothing is registered)"},
    },
    summary="Register a backend from a git repository for the nightly and push rebuilds",
)
def register(session: SessionDep, ctx: ContextDep, body: BackendRequest, who: TriagerDep) -> BackendOut:
    if not is_git_url(body.git):
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, f"{without_userinfo(body.git)!r} is not a git URL")
    if body.subdir is not None and (problem := subdir_problem(body.subdir)) is not None:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, problem)
    try:
        # A sync route: git ls-remote runs in the thread pool, not on the event loop.
        check_source(body.git, body.ref, ctx.settings.git_tokens())
    except SourceUnreachable as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    try:
        add_backend(session, body.name, body.git, changed_by=who.actor, ref=body.ref,
                    subdir=body.subdir, re_register=body.re_register)
    except BackendNameTaken as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    audit(session, who.actor, "backend.add", f"backend:{body.name}",
          {"git": body.git, "ref": body.ref, "subdir": body.subdir})
    session.commit()
    found = backend_out(session, body.name)
    assert found is not None
    return found


@router.delete(
    "/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={
        401: {"model": Problem, "description": "Missing or wrong bearer token"},
        403: {"model": Problem, "description": "The token's role is below triager"},
        404: {"model": Problem, "description": "Not registered"},
    },
    summary="Take a backend off the nightly and push rebuilds (its runs stay)",
)
def remove(session: SessionDep, name: str, who: TriagerDep) -> None:
    if not remove_backend(session, name, changed_by=who.actor):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"backend {name!r} is not registered")
    audit(session, who.actor, "backend.remove", f"backend:{name}")
    session.commit()
