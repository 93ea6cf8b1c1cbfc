"""A real HTTPS server on loopback with its own CA, for what the pipeline fetches from
outside (a PR's wheel): files from a directory, with or without a Content-Length, and
redirects.

``/raw/<name>`` sends the file without a Content-Length (the body ends when the connection
closes); ``/redirect?to=<url>`` answers 302 to ``url``; any other path is a file of the root.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import http.server
import ipaddress
import ssl
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

# Names the certificate holds: tests point a resolver of their own at 127.0.0.1 for them.
TLS_NAMES = ("localhost", "wheels.test")


def make_certificate(directory: Path) -> tuple[Path, Path, Path]:
    """(CA file, server certificate, server key) for TLS_NAMES and 127.0.0.1."""
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ootci test CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in TLS_NAMES]
    sans.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_file, cert_file, key_file = directory / "ca.pem", directory / "cert.pem", directory / "key.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return ca_file, cert_file, key_file


@dataclass
class TlsServer:
    port: int
    ca_file: Path
    requests: list[str]  # paths asked for, in order

    def url(self, path: str, host: str = "localhost") -> str:
        return f"https://{host}:{self.port}/{path.lstrip('/')}"


def _handler(root: Path, seen: list[str]) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        def do_GET(self) -> None:  # noqa: N802
            seen.append(self.path)
            parts = urllib.parse.urlsplit(self.path)
            if parts.path == "/redirect":
                self.send_response(302)
                self.send_header("Location", urllib.parse.parse_qs(parts.query)["to"][0])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            raw = parts.path.startswith("/raw/")
            name = parts.path.removeprefix("/raw/").lstrip("/")
            path = root / name
            if not path.is_file():
                self.send_error(404)
                return
            self.send_response(200)
            if raw:
                self.send_header("Connection", "close")
                self.close_connection = True
            else:
                self.send_header("Content-Length", str(path.stat().st_size))
            self.end_headers()
            with path.open("rb") as f:
                while chunk := f.read(1 << 16):
                    try:
                        self.wfile.write(chunk)
                    except OSError:
                        return  # the client stopped reading: the cap did its job

    return Handler


@contextlib.contextmanager
def serve_tls(root: Path, cert_dir: Path) -> Iterator[TlsServer]:
    """Serve ``root`` over HTTPS on 127.0.0.1 until the block ends."""
    ca_file, cert_file, key_file = make_certificate(cert_dir)
    seen: list[str] = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(root, seen))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield TlsServer(server.server_address[1], ca_file, seen)
    finally:
        server.shutdown()
        server.server_close()
