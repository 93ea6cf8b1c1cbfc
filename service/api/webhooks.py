"""POST /webhooks/github: authenticate, record, deduplicate and route GitHub deliveries.

Order matters: size, then signature (nothing unauthenticated reaches the database, so a
forged delivery id cannot shadow a real one), then headers and JSON. Every authenticated
delivery gets a WebhookDelivery row with its outcome, in the same transaction as the runs
it creates; the runs are enqueued only after that commit.
"""

from __future__ import annotations

import json
import logging
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request, status
from fastapi.responses import JSONResponse
from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from service.api.delivery_log import DeliveryRecorder
from service.api.deps import AppContext, ContextDep
from service.api.triggers import enqueue_committed
from service.commands.runs import create_runs
from service.github.dedupe import content_key, without_active_twins
from service.github.events import ParsedDelivery, PayloadError, parse_delivery
from service.github.relay import ANY_REPOSITORY, signer
from service.github.relay import refusal as relay_refusal
from service.github.routing import IGNORED, QUEUED, RECORDED, Decision, pre_route, route
from service.models import WebhookDelivery, utcnow
from service.schemas import Problem, WebhookResult

log = logging.getLogger(__name__)
router = APIRouter(tags=["webhooks"])

MAX_BODY = 5 * 1024 * 1024
DUPLICATE = "duplicate"
REJECTED = "rejected"


def _problem(code: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=code)


async def _read_capped(request: Request) -> bytes | None:
    """The body, or None as soon as it exceeds MAX_BODY (without buffering the rest)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


@router.post(
    "/webhooks/github",
    response_model=WebhookResult,
    status_code=status.HTTP_202_ACCEPTED,
    responses={
        200: {"model": WebhookResult, "description": "A delivery id seen before: nothing done"},
        400: {"model": Problem, "description": "Missing GitHub headers or malformed JSON"},
        401: {"model": Problem, "description": "Missing or wrong X-Hub-Signature-256"},
        413: {"model": Problem, "description": "Body over 5 MB"},
        503: {"model": Problem, "description": "Database unavailable: not stored, send again"},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    },
    summary="GitHub webhook receiver (pull_request, push, repository_dispatch)",
)
async def github_webhook(
    request: Request,
    ctx: ContextDep,
    x_github_event: Annotated[str | None, Header()] = None,
    x_github_delivery: Annotated[str | None, Header()] = None,
    x_hub_signature_256: Annotated[str | None, Header()] = None,
) -> JSONResponse:
    body = await _read_capped(request)
    if body is None:
        return _problem(413, f"payload larger than {MAX_BODY} bytes")
    if not ctx.settings.webhook_secret.get_secret_value() and not ctx.settings.webhook_secrets:
        return _problem(401, "OOTCI_WEBHOOK_SECRET is not set: refusing unsigned deliveries")
    signed_by = signer(ctx.settings, body, x_hub_signature_256)
    if signed_by is None:
        log.warning("webhook with a missing or wrong signature (delivery %r)", x_github_delivery)
        return _problem(401, "X-Hub-Signature-256 is missing or does not match the payload")
    if not x_github_event or not x_github_delivery:
        return _problem(400, "X-GitHub-Event and X-GitHub-Delivery headers are required")
    if len(x_github_delivery) > 100 or len(x_github_event) > 64:
        return _problem(400, "X-GitHub-Event or X-GitHub-Delivery is too long")
    try:
        payload = json.loads(body)
        problem = None if isinstance(payload, dict) else "body is JSON but not an object"
    except (ValueError, UnicodeDecodeError) as exc:
        problem = f"body is not JSON: {exc}"
    if problem is not None:
        # Signed by GitHub, so worth keeping: the start of what arrived, and why it was refused.
        unparsed = {"unparsed": body[:2048].decode("utf-8", "replace")}
        rejected = _row(x_github_event, x_github_delivery, unparsed)
        try:
            await _recorder(request).record(rejected | {"outcome": REJECTED, "reason": problem})
        except OperationalError:
            log.error("webhook %s (malformed) not stored", x_github_delivery)
        return _problem(400, problem)
    assert isinstance(payload, dict)
    not_for_this_sender = relay_refusal(ctx.settings, x_github_event, payload, signed_by)
    if not_for_this_sender is not None and signed_by != ANY_REPOSITORY:
        # A repository's own secret signed a delivery about another: not authenticated.
        return _problem(401, not_for_this_sender)
    row = _row(x_github_event, x_github_delivery, payload)
    try:
        try:
            parsed = parse_delivery(x_github_event, payload)
            decided = (
                pre_route(ctx.settings, parsed)
                if not_for_this_sender is None
                else Decision(IGNORED, not_for_this_sender)
            )
        except PayloadError as exc:
            # Authenticated but unusable: record it (a redelivery is then a duplicate).
            decided = Decision(REJECTED, f"malformed {x_github_event} payload: {exc}")
        if decided is None:  # it may queue runs: decide and write in one transaction
            return await run_in_threadpool(_route_and_store, ctx, row, parsed)
        # Nothing to queue: the row joins the next group commit, no thread hop needed.
        if not await _recorder(request).record(row | _outcome(decided)):
            return _duplicate(x_github_delivery)
    except OperationalError as exc:
        log.error("webhook %s not stored: %s", x_github_delivery, exc)
        return _problem(503, "the database is unavailable; the delivery was not stored")
    return _accepted(x_github_delivery, decided.outcome, decided.reason, [])


def _row(event: str, delivery: str, payload: dict[str, Any]) -> dict[str, Any]:
    action = payload.get("action")
    return {
        "delivery_id": delivery,
        "event": event,
        # Postgres text cannot hold NUL; the payload (JSON) keeps the original.
        "action": action.replace("\x00", "")[:64] if isinstance(action, str) else None,
        "payload": payload,
        "received_at": utcnow(),
        "run_ids": [],
    }


def _outcome(decision: Decision) -> dict[str, Any]:
    # Reasons quote payload text (repository names, refs); Postgres text cannot hold NUL.
    return {"outcome": decision.outcome, "reason": decision.reason.replace("\x00", "\\0")}


def _recorder(request: Request) -> DeliveryRecorder:
    recorder: DeliveryRecorder = request.app.state.delivery_recorder
    return recorder


def _route_and_store(ctx: AppContext, row: dict[str, Any], parsed: ParsedDelivery) -> JSONResponse:
    """Route with the database; store the runs and the delivery in one transaction and
    enqueue only after the commit."""
    delivery = row["delivery_id"]
    with Session(ctx.engine, expire_on_commit=False) as session:
        decision = _without_active_twins(
            session, route(session, ctx.settings, parsed, delivery_id=delivery)
        )
        if decision.outcome == QUEUED:
            row = row | {"dedupe_key": content_key(parsed, ctx.settings.trigger_label)}
        run_ids = create_runs(session, decision.runs, trigger="webhook")
        try:
            # The unique delivery id and the unique key of what it is about are the dedupe:
            # a replay (under any delivery id, or a concurrent copy) fails here and takes
            # the runs it would have created with it.
            session.execute(
                insert(WebhookDelivery).values(row | _outcome(decision) | {"run_ids": run_ids})
            )
            session.commit()
        except IntegrityError:
            session.rollback()
            return _duplicate(delivery)
    if decision.outcome == QUEUED:
        enqueue_committed(ctx, run_ids)
    return _accepted(delivery, decision.outcome, decision.reason, run_ids)


def _without_active_twins(session: Session, decision: Decision) -> Decision:
    """The decision without the runs identical to one already queued or running."""
    fresh, twins = without_active_twins(session, decision.runs)
    if not twins:
        return decision
    held = f"identical run(s) already queued or running: {', '.join(f'#{i}' for i in twins)}"
    if not fresh:
        return Decision(RECORDED, f"{decision.reason}; {held}")
    return Decision(QUEUED, f"{decision.reason}; {held}", fresh)


def _accepted(delivery: str, outcome: str, reason: str | None, run_ids: list[int]) -> JSONResponse:
    if outcome == REJECTED:
        return _problem(400, reason or "malformed payload")
    result = WebhookResult(status=outcome, delivery=delivery, reason=reason, run_ids=run_ids)
    return JSONResponse(result.model_dump(), status_code=status.HTTP_202_ACCEPTED)


def _duplicate(delivery: str) -> JSONResponse:
    result = WebhookResult(
        status=DUPLICATE, delivery=delivery,
        reason="delivery already received (this id, or the same event under another id)",
    )
    return JSONResponse(result.model_dump(), status_code=status.HTTP_200_OK)
