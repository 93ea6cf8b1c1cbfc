"""``GET /api/audit`` (who changed what, newest first) and token management (admin only:
``GET/POST /api/tokens``, ``DELETE /api/tokens/{name}``)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, status
from pydantic import BaseModel, Field

from service.api.auth import AdminDep
from service.api.deps import SessionDep
from service.api.params import Cursor, Limit, TextFilter
from service.commands.tokens import TokenError, add_token, revoke_token
from service.queries import audit as q
from service.schemas import Problem

router = APIRouter(prefix="/api", tags=["people"])


class AuditOut(BaseModel):
    id: int
    at: dt.datetime
    actor: str
    action: str
    target: str
    detail: dict[str, Any]


class TokenOut(BaseModel):
    name: str
    role: str
    created_by: str
    created_at: dt.datetime
    revoked_at: dt.datetime | None


class TokenRequest(BaseModel):
    name: str = Field(max_length=100)
    role: str = Field(max_length=16)


class TokenCreated(BaseModel):
    name: str
    role: str
    token: str = Field(description="Shown once: only its hash is stored")


@router.get("/audit", response_model=list[AuditOut], summary="The audit log, newest first")
def audit_log(
    session: SessionDep, limit: Limit = 100, before: Cursor = None, actor: TextFilter = None
) -> list[AuditOut]:
    return [AuditOut(**vars(r)) for r in q.audit_log(session, limit=limit, actor=actor,
                                                     before=before)]


@router.get("/tokens", response_model=list[TokenOut], summary="Named tokens (never the tokens)",
            responses={401: {"model": Problem}, 403: {"model": Problem}})
def list_tokens(session: SessionDep, _who: AdminDep) -> list[TokenOut]:
    return [TokenOut(**vars(t)) for t in q.tokens(session)]


@router.post("/tokens", status_code=status.HTTP_201_CREATED, response_model=TokenCreated,
             responses={401: {"model": Problem}, 403: {"model": Problem},
                        422: {"model": Problem, "description": "Bad name or role, or taken"}},
             summary="Make a named token with a role; the answer is the only copy")
def create_token(session: SessionDep, body: TokenRequest, who: AdminDep) -> TokenCreated:
    try:
        made = add_token(session, body.name, body.role, actor=who.actor)
    except TokenError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    session.commit()
    return TokenCreated(name=made.name, role=made.role.value, token=made.secret)


@router.delete("/tokens/{name}", status_code=status.HTTP_204_NO_CONTENT,
               responses={401: {"model": Problem}, 403: {"model": Problem},
                          404: {"model": Problem}},
               summary="Revoke a named token (its sessions end too)")
def delete_token(
    session: SessionDep, name: Annotated[str, Path(max_length=100)], who: AdminDep
) -> None:
    try:
        revoke_token(session, name, actor=who.actor)
    except TokenError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    session.commit()
