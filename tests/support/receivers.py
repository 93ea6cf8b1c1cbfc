"""Receivers of ootci's notifications on loopback: an HTTP server that checks webhook
signatures and records chat posts, and a real SMTP server (aiosmtpd). Each can be started
late (an outage: the port refuses connections) and made to refuse."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.live_server import free_port


@dataclass
class HttpReceiver:
    """POST /hook (a signed webhook) and POST /chat (``{"text": ...}``)."""

    secret: str = ""
    port: int = field(default_factory=free_port)
    hooks: list[dict[str, Any]] = field(default_factory=list)
    bad_signatures: int = 0
    chats: list[str] = field(default_factory=list)
    status: int = 200
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if receiver.status >= 300:
                    self.send_response(receiver.status)
                    self.end_headers()
                    return
                if self.path == "/hook":
                    expected = "sha256=" + hmac.new(receiver.secret.encode(), raw,
                                                    hashlib.sha256).hexdigest()
                    given = self.headers.get("X-Ootci-Signature", "")
                    if not hmac.compare_digest(given, expected):
                        receiver.bad_signatures += 1
                        self.send_response(401)
                        self.end_headers()
                        return
                    receiver.hooks.append(json.loads(raw))
                else:
                    receiver.chats.append(json.loads(raw)["text"])
                self.send_response(204)
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@dataclass
class SmtpReceiver:
    """A real SMTP server; ``refuse`` answers 550 to every recipient."""

    port: int = field(default_factory=free_port)
    messages: list[Message] = field(default_factory=list)
    refuse: bool = False
    _controller: Any = None

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    def start(self) -> None:
        from aiosmtpd.controller import Controller

        receiver = self

        class Handler:
            async def handle_RCPT(self, server: Any, session: Any, envelope: Any,  # noqa: N802
                                  address: str, rcpt_options: Any) -> str:
                if receiver.refuse:
                    return "550 5.1.1 no such mailbox here"
                envelope.rcpt_tos.append(address)
                return "250 OK"

            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
                receiver.messages.append(message_from_bytes(envelope.content))
                return "250 Message accepted"

        self._controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)
        self._controller.start()

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
