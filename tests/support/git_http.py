"""A real git smart-HTTP server over TLS (``git http-backend`` behind Basic auth), for the
credentials a worker sends to a backend's git host: a request without the right token is
401, as GitHub's would be for a private repository."""

from __future__ import annotations

import base64
import contextlib
import http.server
import os
import ssl
import subprocess
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.tls_server import make_certificate


@dataclass
class GitServer:
    port: int
    ca_file: Path
    authorizations: list[str] = field(default_factory=list)  # Authorization headers seen

    def url(self, repo: str) -> str:
        return f"https://localhost:{self.port}/{repo}"


def _handler(project_root: Path, token: str, seen: list[str]) -> type[http.server.BaseHTTPRequestHandler]:
    expected = "Basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        def _serve(self) -> None:
            given = self.headers.get("Authorization", "")
            seen.append(given)
            if given != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            parts = urllib.parse.urlsplit(self.path)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "GIT_PROJECT_ROOT": str(project_root), "GIT_HTTP_EXPORT_ALL": "1",
                "PATH_INFO": parts.path, "QUERY_STRING": parts.query,
                "REQUEST_METHOD": self.command, "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)), "REMOTE_USER": "x-access-token",
                "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            }
            out = subprocess.run(["git", "http-backend"], input=body, env=env,
                                 capture_output=True, timeout=60).stdout
            head, _, payload = out.partition(b"\r\n\r\n")
            headers = [line.split(":", 1) for line in head.decode().split("\r\n") if ":" in line]
            status = next((int(v.split()[0]) for k, v in headers if k.lower() == "status"), 200)
            self.send_response(status)
            for key, value in headers:
                if key.lower() != "status":
                    self.send_header(key, value.strip())
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = _serve  # noqa: N815
        do_POST = _serve  # noqa: N815

    return Handler


@contextlib.contextmanager
def serve_git(project_root: Path, cert_dir: Path, token: str) -> Iterator[GitServer]:
    """Serve the bare repositories under ``project_root`` to whoever sends ``token``."""
    ca_file, cert_file, key_file = make_certificate(cert_dir)
    seen: list[str] = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(project_root, token, seen))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield GitServer(server.server_address[1], ca_file, seen)
    finally:
        server.shutdown()
        server.server_close()
