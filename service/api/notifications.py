"""``/api/subscriptions``: who hears about a backend (triagers and admins make and remove
them; reading lists them without secrets)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from fastapi import APIRouter, HTTPException, status
from pydantic import BaseModel, Field

from service.api.auth import TriagerDep
from service.api.deps import SessionDep
from service.api.params import MAX_ID, TextFilter
from service.commands.notifications import add_subscription, remove_subscription
from service.domain.notify import NotifyInputError
from service.queries.subscriptions import subscriptions
from service.schemas import Problem

router = APIRouter(prefix="/api/subscriptions", tags=["notifications"])


class SubscriptionOut(BaseModel):
    id: int
    backend: str
    events: list[str]
    channel: str
    target: str
    digest: bool
    created_by: str
    created_at: dt.datetime


class SubscriptionRequest(BaseModel):
    backend: str = Field(max_length=100)
    events: str = Field(max_length=500, description="Comma-separated: new-breakage, resolved, "
                        "culprit-confirmed, pin-bump, run-errored")
    channel: str = Field(max_length=16, description="webhook, email or chat")
    target: str = Field(max_length=2000, description="The URL, or the email address")
    digest: bool = Field(False, description="email only: one message a day")


class SubscriptionCreated(BaseModel):
    id: int
    secret: str | None = Field(description="A webhook's HMAC key (X-Ootci-Signature), shown once")


_WRITE: dict[int | str, dict[str, Any]] = {401: {"model": Problem}, 403: {"model": Problem}}


@router.get("", response_model=list[SubscriptionOut], summary="Subscriptions (no secrets)")
def list_subscriptions(session: SessionDep, backend: TextFilter = None) -> list[SubscriptionOut]:
    return [SubscriptionOut(**vars(r)) for r in subscriptions(session, backend)]


@router.post("", status_code=status.HTTP_201_CREATED, response_model=SubscriptionCreated,
             responses={**_WRITE, 422: {"model": Problem, "description": "Unknown backend, "
                                        "event or channel; a bad URL or address"}},
             summary="Subscribe a webhook, an email address or a chat webhook to a backend")
def create(session: SessionDep, body: SubscriptionRequest, who: TriagerDep) -> SubscriptionCreated:
    try:
        made = add_subscription(session, body.backend, body.events, body.channel, body.target,
                                digest=body.digest, actor=who.actor)
    except NotifyInputError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    session.commit()
    return SubscriptionCreated(id=made.id, secret=made.secret)


@router.delete("/{subscription_id}", status_code=status.HTTP_204_NO_CONTENT,
               responses={**_WRITE, 404: {"model": Problem}}, summary="Remove a subscription")
def delete(session: SessionDep, subscription_id: int, who: TriagerDep) -> None:
    if not 1 <= subscription_id <= MAX_ID:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no subscription {subscription_id}")
    try:
        remove_subscription(session, subscription_id, actor=who.actor)
    except NotifyInputError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    session.commit()
