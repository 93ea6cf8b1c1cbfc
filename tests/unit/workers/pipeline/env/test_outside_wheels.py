"""A PR run's wheel, named from outside, fetched by the worker from a real HTTPS server:
only https, only allowed hosts, only checked addresses (the connection goes to the address
that was checked), a size cap while streaming, and the relay's sha256."""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.domain.torch_spec import parse_spec
from service.domain.wheel_url import IPAddress, WheelPolicy
from tests.support.file_server import serve_directory
from tests.support.tls_server import TlsServer, serve_tls
from workers.pipeline.env.wheel_fetch import OutsideWheel, fetch_outside_wheel, outside_wheel_spec
from workers.pipeline.errors import SpecError
from workers.pipeline.logs.sink import LogSink

WHEEL = "torch-2.14.0-py3-none-any.whl"
LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "www"
    root.mkdir()
    (root / WHEEL).write_bytes(b"PK-not-really-a-wheel" * 5000)  # 105 000 bytes
    return root


@pytest.fixture
def server(root: Path, tmp_path: Path) -> Iterator[TlsServer]:
    with serve_tls(root, tmp_path) as server:
        yield server


@pytest.fixture
def log(tmp_path: Path) -> Iterator[LogSink]:
    with LogSink(tmp_path / "provision.log") as sink:
        yield sink


def _outside(server: TlsServer, *, hosts: tuple[str, ...] = ("localhost", "wheels.test"),
             networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = LOOPBACK,
             max_bytes: int = 1 << 30, sha256: str = "") -> OutsideWheel:
    return OutsideWheel(WheelPolicy(frozenset(hosts), max_bytes, allowed_networks=networks),
                        sha256, server.ca_file)


def _to_loopback(host: str, port: int) -> list[IPAddress]:
    return [ipaddress.ip_address("127.0.0.1")]


def test_https_from_an_allowed_host_is_fetched_and_pinned_to_the_relays_hash(
    server: TlsServer, root: Path, tmp_path: Path, log: LogSink
) -> None:
    sha = hashlib.sha256((root / WHEEL).read_bytes()).hexdigest()
    spec = parse_spec("wheel:" + server.url(WHEEL))
    local = outside_wheel_spec(spec, tmp_path / "cache", log, _outside(server, sha256=sha))
    assert Path(local.location).read_bytes() == (root / WHEEL).read_bytes()
    assert local.sha256 == sha and local.text == spec.text


def test_the_connection_goes_to_the_address_that_was_checked(
    server: TlsServer, tmp_path: Path, log: LogSink
) -> None:
    # wheels.test resolves nowhere but through this resolver, asked once: a fetch that
    # resolved again (a DNS rebind's chance) or connected by name would fail.
    asked: list[str] = []

    def once(host: str, port: int) -> list[IPAddress]:
        asked.append(host)
        if len(asked) > 1:
            return [ipaddress.ip_address("169.254.169.254")]
        return [ipaddress.ip_address("127.0.0.1")]

    path = fetch_outside_wheel(server.url(WHEEL, host="wheels.test"), tmp_path / "c", log,
                               _outside(server), resolver=once)
    assert path.stat().st_size == 105_000 and asked == ["wheels.test"]


def test_loopback_is_refused_unless_the_operator_lists_it(
    server: TlsServer, tmp_path: Path, log: LogSink
) -> None:
    with pytest.raises(SpecError, match=r"resolves to 127\.0\.0\.1, a loopback address"):
        fetch_outside_wheel(server.url(WHEEL), tmp_path / "c", log, _outside(server, networks=()))
    assert server.requests == []


def test_one_private_answer_among_the_addresses_refuses(
    server: TlsServer, tmp_path: Path, log: LogSink
) -> None:
    def mixed(host: str, port: int) -> list[IPAddress]:
        return [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("10.0.0.8")]

    with pytest.raises(SpecError, match=r"10\.0\.0\.8, a private address"):
        fetch_outside_wheel(server.url(WHEEL, host="wheels.test"), tmp_path / "c", log,
                            _outside(server), resolver=mixed)
    assert server.requests == []


def test_plain_http_and_unlisted_hosts_are_refused_before_any_request(
    server: TlsServer, root: Path, tmp_path: Path, log: LogSink
) -> None:
    with serve_directory(root) as plain:
        http_url = plain.replace("127.0.0.1", "localhost") + "/" + WHEEL
        with pytest.raises(SpecError, match="not https"):
            fetch_outside_wheel(http_url, tmp_path / "c", log, _outside(server))
    with pytest.raises(SpecError, match="not in OOTCI_WHEEL_HOSTS"):
        fetch_outside_wheel(server.url(WHEEL), tmp_path / "c", log,
                            _outside(server, hosts=("download.pytorch.org",)))
    assert server.requests == []


def test_a_redirect_is_followed_only_where_a_wheel_may_come_from(
    server: TlsServer, tmp_path: Path, log: LogSink
) -> None:
    good = server.url(f"redirect?to={server.url(WHEEL, host='wheels.test')}")
    path = fetch_outside_wheel(good, tmp_path / "c", log, _outside(server), resolver=_to_loopback)
    assert path.stat().st_size == 105_000
    metadata = "http://169.254.169.254/latest/meta-data/torch-2.14.0-py3-none-any.whl"
    with pytest.raises(SpecError, match="not https"):
        fetch_outside_wheel(server.url(f"redirect?to={metadata}"), tmp_path / "d", log,
                            _outside(server), resolver=_to_loopback)


@pytest.mark.parametrize("path", [WHEEL, f"raw/{WHEEL}"], ids=["content-length", "streamed"])
def test_the_size_cap_holds_for_declared_and_streamed_bytes(
    server: TlsServer, tmp_path: Path, log: LogSink, path: str
) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(SpecError, match=r"over the cap of 50000 bytes \(OOTCI_WHEEL_MAX_MB\)"):
        fetch_outside_wheel(server.url(path), cache, log, _outside(server, max_bytes=50_000))
    assert [p for p in cache.rglob("*") if p.is_file()] == []  # nothing half-written kept
    fetched = fetch_outside_wheel(server.url(path), cache, log, _outside(server, max_bytes=200_000))
    assert fetched.stat().st_size == 105_000


def test_a_hash_mismatch_names_both_hashes_and_keeps_nothing(
    server: TlsServer, root: Path, tmp_path: Path, log: LogSink
) -> None:
    actual = hashlib.sha256((root / WHEEL).read_bytes()).hexdigest()
    claimed = "ab" * 32
    cache = tmp_path / "cache"
    with pytest.raises(SpecError) as raised:
        fetch_outside_wheel(server.url(WHEEL), cache, log, _outside(server, sha256=claimed))
    assert actual in str(raised.value) and claimed in str(raised.value)
    assert [p for p in cache.rglob("*") if p.is_file()] == []


def test_a_certificate_the_ca_file_does_not_sign_is_not_believed(
    server: TlsServer, tmp_path: Path, log: LogSink
) -> None:
    untrusting = OutsideWheel(_outside(server).policy, "", None)  # the system's CAs only
    with pytest.raises(Exception, match="TLS failed"):
        fetch_outside_wheel(server.url(WHEEL), tmp_path / "c", log, untrusting)


def test_a_prs_wheel_is_fetched_once_for_its_backends_but_judged_every_time(
    server: TlsServer, tmp_path: Path, log: LogSink
) -> None:
    cache = tmp_path / "cache"
    first = fetch_outside_wheel(server.url(WHEEL), cache, log, _outside(server))
    again = fetch_outside_wheel(server.url(WHEEL), cache, log, _outside(server))
    assert first == again and server.requests == [f"/{WHEEL}"]
    with pytest.raises(SpecError, match="a loopback address"):
        fetch_outside_wheel(server.url(WHEEL), cache, log, _outside(server, networks=()))
    assert [p.name for p in first.parent.iterdir()] == [WHEEL]  # no partial files left
