"""What ootci publishes on GitHub keeps the worker's paths and internal hosts inside."""

from __future__ import annotations

import pytest

from service.domain.public_text import internal_host, public_text


@pytest.mark.parametrize(
    ("text", "published"),
    [
        ("no wheel file at /var/lib/ootci/work/run-7/torch-2.14.0-py3-none-any.whl",
         "no wheel file at .../torch-2.14.0-py3-none-any.whl"),
        ("/root/.ootci/cache/sources/acme/0123/csrc/ops.cpp:12: error: no member",
         ".../ops.cpp:12: error: no member"),
        ("wheel http://10.0.3.4:8080/pr/torch.whl: HTTP 404", "wheel <internal>: HTTP 404"),
        ("see http://ootci-api.ootci.svc.cluster.local/runs/3", "see <internal>"),
        ("fetched file:///srv/wheels/torch.whl", "fetched <internal>"),
        ("from http://localhost:8000/x and http://redis:6379", "from <internal> and <internal>"),
        ("torch from https://download.pytorch.org/whl/nightly/cpu",
         "torch from https://download.pytorch.org/whl/nightly/cpu"),
        ("passed against torch 2.14.0 (3/4 tests, 1 flake)", "passed against torch 2.14.0 (3/4 tests, 1 flake)"),
        ("pip:torch==2.13.0 failed: a/b/c relative stays", "pip:torch==2.13.0 failed: a/b/c relative stays"),
    ],
)
def test_paths_and_internal_urls_are_masked(text: str, published: str) -> None:
    assert public_text(text) == published


def test_the_dashboards_own_host_stays_linkable_even_if_it_looks_internal() -> None:
    text = "see https://ootci.corp/runs/4 and http://10.1.1.1/x"
    assert public_text(text, "https://ootci.corp") == "see https://ootci.corp/runs/4 and <internal>"


@pytest.mark.parametrize("host", ["10.0.0.1", "127.0.0.1", "::1", "169.254.169.254", "redis",
                                  "db.internal", "api.ootci.svc", "printer.local"])
def test_internal_hosts(host: str) -> None:
    assert internal_host(host)


def test_public_hosts() -> None:
    assert not internal_host("download.pytorch.org") and not internal_host("151.101.1.1")
