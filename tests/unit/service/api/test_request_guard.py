"""Bodies are capped and API writes authenticated before the body is read (issue #14,
item 6), against real uvicorn on loopback with raw sockets: the client declares a 300 MB
body and sends almost none of it, so an answer proves the server did not wait to read it."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from service.config import Settings
from tests.support.live_server import LiveServer, serve

TOKEN = "t0ken-for-guard-tests"
HUGE = 300 * 1024 * 1024


@pytest.fixture
def server(engine: Engine, tmp_path: Path) -> Iterator[LiveServer]:
    settings = Settings(home=tmp_path / "home", api_token=TOKEN, webhook_secret="s3cret")
    yield from serve(engine, tmp_path, settings)


def raw_request(server: LiveServer, head: str, body: bytes = b"") -> tuple[int, bytes]:
    """Send ``head`` and ``body`` and read the answer; a server that waits for the rest of
    a declared body times out here instead of answering."""
    port = int(server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    return status, answer


def test_unauthenticated_300mb_api_write_is_401_before_the_body_is_read(
    server: LiveServer,
) -> None:
    head = (f"POST /api/runs HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\n"
            f"Content-Length: {HUGE}\n")
    status, answer = raw_request(server, head, b'{"backend": "')
    assert status == 401, answer


def test_authenticated_oversized_api_body_is_413_before_it_is_read(server: LiveServer) -> None:
    head = (f"POST /api/runs HTTP/1.1\nHost: 127.0.0.1\nAuthorization: Bearer {TOKEN}\n"
            f"Content-Type: application/json\nContent-Length: {HUGE}\n")
    status, _ = raw_request(server, head, b'{"backend": "')
    assert status == 413


def test_a_chunked_body_without_a_length_stops_at_the_cap(server: LiveServer) -> None:
    piece = b"x" * 60_000
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(3))
    head = (f"POST /api/runs HTTP/1.1\nHost: 127.0.0.1\nAuthorization: Bearer {TOKEN}\n"
            "Content-Type: application/json\nTransfer-Encoding: chunked\n")
    status, _ = raw_request(server, head, chunked)
    assert status == 413


def test_a_small_authenticated_body_still_reaches_the_route(server: LiveServer) -> None:
    body = b'{"backend": "nope", "torch": "nightly"}'
    head = (f"POST /api/runs HTTP/1.1\nHost: 127.0.0.1\nAuthorization: Bearer {TOKEN}\n"
            f"Content-Type: application/json\nContent-Length: {len(body)}\nConnection: close\n")
    status, answer = raw_request(server, head, body)
    assert status == 404, answer  # the route ran: the backend is unknown


def test_webhook_declaring_300mb_is_413_unread(server: LiveServer) -> None:
    head = (f"POST /webhooks/github HTTP/1.1\nHost: 127.0.0.1\nX-GitHub-Event: ping\n"
            f"X-GitHub-Delivery: d1\nContent-Length: {HUGE}\n")
    status, _ = raw_request(server, head, b"{")
    assert status == 413
