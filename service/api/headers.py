"""Security headers on every answer, and the hosts the app answers for.

Pages load scripts and styles from ``/static`` only (no inline code: the templates in
``dashboards/`` keep theirs in static files), so the policy can forbid everything else; a
page cannot be framed (clickjacking) and sends no Referer off the site. ``/docs`` and
``/redoc`` are FastAPI's, loading Swagger UI and ReDoc from their CDN with an inline
bootstrap script, so they get a policy that allows exactly that.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

STRICT_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
API_DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
    "style-src 'self' https://cdn.jsdelivr.net; img-src 'self' data: https://fastapi.tiangolo.com "
    "https://cdn.redoc.ly; worker-src blob:; connect-src 'self'; object-src 'none'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
API_DOCS_PATHS = frozenset({"/docs", "/redoc", "/docs/oauth2-redirect"})


def security_headers(path: str) -> list[tuple[bytes, bytes]]:
    csp = API_DOCS_CSP if path in API_DOCS_PATHS else STRICT_CSP
    return [
        (b"content-security-policy", csp.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"x-frame-options", b"DENY"),
        (b"referrer-policy", b"same-origin"),
    ]


class SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        added = security_headers(scope["path"])
        names = {name for name, _ in added}

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": kept + added}
            await send(message)

        await self.app(scope, receive, send_with_headers)
