"""The door before any route: request bodies are capped, and API writes authenticated,
before a byte of the body is read.

FastAPI reads and parses a route's body before it solves the route's dependencies (the
bearer-token check among them), so without this a caller with no token could make the
server buffer any body it sends. This is a plain ASGI middleware: it sees the headers
first, answers 401/413 without calling ``receive``, and counts the bytes of a body it lets
through (a chunked body declares no length) so an oversized one stops at the cap.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.auth import authenticate
from service.api.webhooks import MAX_BODY as MAX_WEBHOOK_BODY
from service.config import Settings

READ_ONLY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
API_PREFIX = "/api/"
MAX_API_BODY = 64 * 1024  # a run request is a few hundred bytes
WEBHOOK_PATH = "/webhooks/github"


@dataclass(frozen=True)
class BodyLimits:
    default: int = MAX_API_BODY
    webhook: int = MAX_WEBHOOK_BODY

    def for_path(self, path: str) -> int:
        return self.webhook if path == WEBHOOK_PATH else self.default


class RequestGuard:
    def __init__(self, app: ASGIApp, *, settings: Settings, engine: Engine,
                 limits: BodyLimits = BodyLimits()):
        self.app = app
        self.settings = settings
        self.engine = engine
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in READ_ONLY_METHODS:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        path: str = scope["path"]
        if path.startswith(API_PREFIX):
            scheme, _, given = headers.get("authorization", "").partition(" ")
            # Who it is, here; whether the role may, at the route (require_role): a
            # viewer's token is a 403 there, an unknown one a 401 here.
            identity = await run_in_threadpool(
                authenticate, self.settings, self.engine,
                given.strip() if scheme.lower() == "bearer" else "")
            if identity is None:
                await _answer(send, 401, _refusal(self.settings), {"www-authenticate": "Bearer"})
                return
            scope.setdefault("state", {})["ootci_identity"] = identity
        cap = self.limits.for_path(path)
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > cap:
            await _answer(send, 413, f"request body larger than {cap} bytes")
            return
        received = 0
        refused_midway = False

        async def capped_receive() -> Message:
            # Over the cap: answer 413 now and tell the app the client left, so it stops
            # reading; whatever it answers then is dropped (FastAPI turns any error raised
            # while it reads a body into its own 400, so raising here would not do).
            nonlocal received, refused_midway
            if refused_midway:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > cap:
                    refused_midway = True
                    await _answer(send, 413, f"request body larger than {cap} bytes")
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if not refused_midway:
                await send(message)

        await self.app(scope, capped_receive, guarded_send)


def _refusal(settings: Settings) -> str:
    if settings.api_token.get_secret_value():
        return "a valid bearer token is required (OOTCI_API_TOKEN, or one of `ootci token add`)"
    return ("a valid bearer token is required: one of `ootci token add` "
            "(OOTCI_API_TOKEN is not set on the server)")


async def _answer(send: Send, code: int, detail: str, extra: dict[str, str] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    # Connection: close, so the server does not try to read the unread body as the next request.
    headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": code, "headers": headers})
    await send({"type": "http.response.body", "body": body})
