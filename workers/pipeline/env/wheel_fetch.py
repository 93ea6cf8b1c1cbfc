"""Fetching a torch wheel someone outside named (a PR run's relay ``wheel_url`` or template).

The door (``service/github/pr_runs.py``) already refused what it could see; here the URL is
judged again by the same rules (``service/domain/wheel_url.py``) and the host resolved once:
every address it gives must pass, and the connection goes to one of *those* addresses (TLS
still checks the certificate against the host name), so a DNS answer that changes between
the check and the fetch cannot send the worker elsewhere. Redirects are followed only to
URLs that pass the same checks. The size cap holds against the declared Content-Length and
against the bytes as they stream; the sha256 the relay gave is checked on the same pass.
"""

from __future__ import annotations

import hashlib
import http.client
import ipaddress
import os
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from service.domain.torch_spec import SourceKind, TorchSpec
from service.domain.wheel_url import IPAddress, WheelPolicy, address_refusal, url_refusal
from workers.pipeline.cache.layout import wheel_file
from workers.pipeline.errors import ProvisionError, SpecError
from workers.pipeline.logs.sink import LogSink

HTTP_TIMEOUT_S = 60
MAX_REDIRECTS = 5
_CHUNK = 1 << 20

Resolver = Callable[[str, int], Sequence[IPAddress]]


def resolve_host(host: str, port: int) -> list[IPAddress]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ProvisionError(f"wheel host {host!r} does not resolve: {exc}") from None
    seen: list[IPAddress] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if address not in seen:
            seen.append(address)
    return seen


@dataclass(frozen=True)
class OutsideWheel:
    """What the run's trigger said about its wheel: it came from outside, maybe hashed."""

    policy: WheelPolicy
    sha256: str = ""
    ca_file: Path | None = None


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to the address that was checked, whatever the host resolves to by then."""

    def __init__(self, host: str, port: int, address: IPAddress, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = str(address)

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(_PinnedHTTPConnection):
    def __init__(
        self, host: str, port: int, address: IPAddress, timeout: float, context: ssl.SSLContext
    ) -> None:
        super().__init__(host, port, address, timeout)
        self._context = context

    def connect(self) -> None:
        super().connect()
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self.host)


def _checked_addresses(url: str, policy: WheelPolicy, resolver: Resolver) -> list[IPAddress]:
    refused = url_refusal(url, policy)
    if refused is not None:
        raise SpecError(refused)
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    addresses = list(resolver(host, port))
    refused = address_refusal(host, addresses, policy)
    if refused is not None:
        raise SpecError(refused)
    return addresses


def _open(
    url: str, outside: OutsideWheel, resolver: Resolver, addresses: list[IPAddress]
) -> tuple[Any, http.client.HTTPResponse]:
    """The response to GET ``url`` from ``addresses`` (checked for it), redirects followed
    (each judged and resolved afresh)."""
    for hop in range(MAX_REDIRECTS + 1):
        if hop:
            addresses = _checked_addresses(url, outside.policy, resolver)
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        path = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
        last: OSError | None = None
        for address in addresses:
            conn: _PinnedHTTPConnection
            if parts.scheme == "https":
                context = ssl.create_default_context(
                    cafile=str(outside.ca_file) if outside.ca_file else None
                )
                conn = _PinnedHTTPSConnection(host, port, address, HTTP_TIMEOUT_S, context)
            else:
                conn = _PinnedHTTPConnection(host, port, address, HTTP_TIMEOUT_S)
            try:
                conn.request("GET", path, headers={"User-Agent": "ootci"})
                resp = conn.getresponse()
            except ssl.SSLError as exc:
                conn.close()
                raise ProvisionError(f"wheel {url}: TLS failed: {exc}") from None
            except OSError as exc:
                conn.close()
                last = exc
                continue
            break
        else:
            raise ProvisionError(f"wheel {url}: download failed: {last}")
        if resp.status in (301, 302, 303, 307, 308) and resp.getheader("Location"):
            url = urllib.parse.urljoin(url, resp.getheader("Location", ""))
            conn.close()
            continue
        return conn, resp
    raise ProvisionError(f"wheel {url}: more than {MAX_REDIRECTS} redirects")


def _too_big(url: str, size: int, policy: WheelPolicy) -> SpecError:
    return SpecError(
        f"wheel {url}: {size} bytes or more, over the cap of {policy.max_bytes} bytes "
        "(OOTCI_WHEEL_MAX_MB)"
    )


def fetch_outside_wheel(
    url: str,
    cache_dir: Path,
    log: LogSink,
    outside: OutsideWheel,
    *,
    resolver: Resolver = resolve_host,
) -> Path:
    """The wheel at ``url`` as a local file under ``<cache_dir>/wheels``, fetched under
    ``outside``'s rules. A refusal or a hash mismatch is the spec's fault (SpecError)."""
    name = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
    target = wheel_file(cache_dir, url, name)
    # Judged now even when a copy is cached: the rules may have changed since it was fetched.
    addresses = _checked_addresses(url, outside.policy, resolver)
    if target.is_file() and (not outside.sha256 or _sha256(target) == outside.sha256):
        # The backends of one PR share its wheel: fetched once, checked by hash on install.
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    log.write(f"ootci: downloading {url} (from outside: checked host, addresses and size)")
    conn, resp = _open(url, outside, resolver, addresses)
    # Its own partial file: runs of the same PR fetch the same URL at the same time.
    partial = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        if resp.status != 200:
            raise (SpecError if resp.status == 404 else ProvisionError)(
                f"wheel {url}: HTTP {resp.status} {resp.reason}"
            )
        declared = resp.getheader("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) > outside.policy.max_bytes:
            raise _too_big(url, int(declared), outside.policy)
        digest = hashlib.sha256()
        got = 0
        with partial.open("wb") as out:
            while chunk := resp.read(_CHUNK):
                got += len(chunk)
                if got > outside.policy.max_bytes:
                    raise _too_big(url, got, outside.policy)
                digest.update(chunk)
                out.write(chunk)
        if outside.sha256 and digest.hexdigest() != outside.sha256:
            raise SpecError(
                f"wheel {url}: its sha256 is {digest.hexdigest()}, the relay said {outside.sha256}"
            )
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        conn.close()
    partial.rename(target)
    return target


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def outside_wheel_spec(
    spec: TorchSpec, cache_dir: Path, log: LogSink, outside: OutsideWheel
) -> TorchSpec:
    """``spec`` with its wheel fetched under ``outside``'s rules: the local file, pinned to
    the bytes fetched (the relay's sha256 when it gave one)."""
    if spec.kind is not SourceKind.WHEEL:
        return spec
    try:
        path = fetch_outside_wheel(spec.location, cache_dir, log, outside)
    except SpecError as exc:
        raise SpecError(f"torch spec {spec.text!r}: {exc}") from None
    return replace(spec, location=str(path), sha256=outside.sha256)
