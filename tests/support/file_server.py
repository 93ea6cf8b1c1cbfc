"""A directory served over loopback HTTP, for what the pipeline fetches by URL (wheels a
relay or an index points at)."""

from __future__ import annotations

import contextlib
import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# The settings under which a PR run's wheel may come from serve_directory: plain http from
# a loopback address, which the defaults refuse (tests only).
LOOPBACK_WHEELS: dict[str, Any] = {
    "wheel_hosts": ["127.0.0.1"],
    "wheel_allow_http": True,
    "wheel_allow_addresses": ["127.0.0.0/8"],
}
LOOPBACK_WHEELS_ENV = {
    "OOTCI_WHEEL_HOSTS": '["127.0.0.1"]',
    "OOTCI_WHEEL_ALLOW_HTTP": "true",
    "OOTCI_WHEEL_ALLOW_ADDRESSES": '["127.0.0.0/8"]',
}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@contextlib.contextmanager
def serve_directory(root: Path) -> Iterator[str]:
    """Serve ``root`` until the block ends; yields its base URL."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
