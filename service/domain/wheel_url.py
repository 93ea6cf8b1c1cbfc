"""Which torch wheel URLs from outside (a relay's ``wheel_url``, the PR wheel template) a
worker may fetch.

A PR run installs a wheel someone else names, and the worker fetching it sits inside the
deployment's network: an http URL can be swapped on the way, and a host that resolves to
loopback, a link-local metadata service or a private address makes the worker a proxy into
that network. So such a URL must be https, its host one the operator allows
(``OOTCI_WHEEL_HOSTS``), and every address the host resolves to public. The address rule
has one opening the operator names (``OOTCI_WHEEL_ALLOW_ADDRESSES``: a mirror inside the
network, or a test's loopback server); plain http only with ``OOTCI_WHEEL_ALLOW_HTTP``, a
test's setting. Pure: resolving the host is the caller's.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass

DEFAULT_WHEEL_HOSTS = ("download.pytorch.org",)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class WheelPolicy:
    hosts: frozenset[str]  # lower case host names a wheel may come from
    max_bytes: int
    allow_http: bool = False  # tests only: the default never allows it
    allowed_networks: tuple[IPNetwork, ...] = ()  # exempt from the public-address rule


def default_hosts(*index_urls: str) -> frozenset[str]:
    """download.pytorch.org and the hosts of the configured indexes."""
    hosts = {h for h in DEFAULT_WHEEL_HOSTS}
    for url in index_urls:
        host = urllib.parse.urlsplit(url).hostname if url else None
        if host:
            hosts.add(host.lower())
    return frozenset(hosts)


def parse_networks(texts: Iterable[str]) -> tuple[IPNetwork, ...]:
    """CIDRs (or single addresses) as networks; ValueError names a bad one."""
    return tuple(ipaddress.ip_network(t.strip(), strict=False) for t in texts)


def url_refusal(url: str, policy: WheelPolicy) -> str | None:
    """Why ``url`` may not be fetched, judged from its text alone, or None."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError as exc:
        return f"wheel URL {url!r} does not parse: {exc}"
    allowed_schemes = {"https", "http"} if policy.allow_http else {"https"}
    if parts.scheme not in allowed_schemes:
        return f"wheel URL {url!r} is not https: a wheel from outside is fetched only over https"
    if parts.username is not None or parts.password is not None:
        return f"wheel URL {_without_userinfo(parts)!r} carries credentials"
    if not host:
        return f"wheel URL {url!r} has no host"
    if host.lower() not in policy.hosts:
        allowed = ", ".join(sorted(policy.hosts)) or "none"
        return (
            f"wheel URL {url!r}: host {host!r} is not in OOTCI_WHEEL_HOSTS ({allowed})"
        )
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        return None
    return address_refusal(host, [literal], policy)


def _without_userinfo(parts: urllib.parse.SplitResult) -> str:
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def _kind(address: IPAddress) -> str | None:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return _kind(address.ipv4_mapped)
    for name, flag in (
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("unspecified", address.is_unspecified),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
    ):
        if flag:
            return name
    return None if address.is_global else "non-public"


def address_refusal(host: str, addresses: Iterable[IPAddress], policy: WheelPolicy) -> str | None:
    """Why a host resolving to ``addresses`` may not be fetched from (every address is
    judged: one bad answer among good ones could be the one a connection gets), or None."""
    addresses = list(addresses)
    if not addresses:
        return f"wheel host {host!r} resolves to no address"
    for address in addresses:
        if any(address in net for net in policy.allowed_networks):
            continue
        kind = _kind(address)
        if kind is not None:
            return (
                f"wheel host {host!r} resolves to {address}, a {kind} address: a wheel "
                "from outside is fetched only from public addresses (OOTCI_WHEEL_ALLOW_ADDRESSES)"
            )
    return None
