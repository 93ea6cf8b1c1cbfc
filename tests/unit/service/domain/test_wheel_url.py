"""The rules a wheel URL from outside (a PR run's) must pass before a worker fetches it."""

from __future__ import annotations

import ipaddress

import pytest

from service.config import Settings
from service.domain.wheel_url import WheelPolicy, address_refusal, url_refusal

POLICY = WheelPolicy(hosts=frozenset({"download.pytorch.org"}), max_bytes=1 << 30)
OK = "https://download.pytorch.org/whl/pr/torch-2.14.0-cp311-none-linux_x86_64.whl"


def test_https_on_an_allowed_host_passes() -> None:
    assert url_refusal(OK, POLICY) is None


@pytest.mark.parametrize(
    ("url", "says"),
    [
        (OK.replace("https:", "http:"), "not https"),
        ("ftp://download.pytorch.org/torch.whl", "not https"),
        ("https://evil.example.org/torch-2.14.0-py3-none-any.whl", "not in OOTCI_WHEEL_HOSTS"),
        ("https://user:tok@download.pytorch.org/t.whl", "carries credentials"),
        ("https://127.0.0.1/t.whl", "not in OOTCI_WHEEL_HOSTS"),
        ("https://download.pytorch.org:99999/t.whl", "does not parse"),
    ],
)
def test_what_the_url_alone_gives_away_is_refused(url: str, says: str) -> None:
    refused = url_refusal(url, POLICY)
    assert refused is not None and says in refused
    assert "tok" not in refused  # the credentials are not repeated


def test_an_allowed_ip_literal_is_still_judged_by_its_address() -> None:
    policy = WheelPolicy(hosts=frozenset({"169.254.169.254"}), max_bytes=1)
    refused = url_refusal("https://169.254.169.254/latest/t.whl", policy)
    assert refused is not None and "link-local" in refused


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"), ("::1", "loopback"), ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"), ("10.1.2.3", "private"), ("192.168.0.7", "private"),
        ("172.16.5.4", "private"), ("fd00::5", "private"), ("224.0.0.1", "multicast"),
        ("0.0.0.0", "unspecified"), ("::ffff:127.0.0.1", "loopback"), ("100.64.0.1", "non-public"),
    ],
)
def test_every_non_public_kind_of_address_is_refused(address: str, kind: str) -> None:
    refused = address_refusal("h.example", [ipaddress.ip_address(address)], POLICY)
    assert refused is not None and f"a {kind} address" in refused


def test_one_bad_address_among_public_ones_is_enough_to_refuse() -> None:
    public = ipaddress.ip_address("151.101.1.1")
    assert address_refusal("h", [public], POLICY) is None
    assert address_refusal("h", [public, ipaddress.ip_address("10.0.0.1")], POLICY) is not None
    assert address_refusal("h", [], POLICY) is not None


def test_the_operators_networks_are_the_only_exception() -> None:
    policy = WheelPolicy(POLICY.hosts, 1, allowed_networks=(ipaddress.ip_network("10.8.0.0/16"),))
    assert address_refusal("mirror", [ipaddress.ip_address("10.8.3.4")], policy) is None
    assert address_refusal("mirror", [ipaddress.ip_address("10.9.3.4")], policy) is not None


def test_the_default_settings_allow_pytorchs_host_and_the_configured_indexes_only() -> None:
    policy = Settings(pip_index_url="https://mirror.example.org/simple").wheel_policy
    assert policy.hosts == {"download.pytorch.org", "mirror.example.org"}
    assert not policy.allow_http and policy.allowed_networks == ()
    assert policy.max_bytes == 8192 * 1024 * 1024
    explicit = Settings(wheel_hosts=["Wheels.Example.org"], wheel_max_mb=10).wheel_policy
    assert explicit.hosts == {"wheels.example.org"} and explicit.max_bytes == 10 << 20
