"""What a remote caller may ask for (service/domain/admission.py): pure, no fixtures."""

from __future__ import annotations

import pytest

from service.domain.admission import CallerPolicy, refusal
from service.domain.torch_spec import parse_spec

POLICY = CallerPolicy(
    configured_specs=frozenset({"pip:torch==2.13.0", "installed"}),
    pip_index_url="https://pypi.example.org/simple/",
    nightly_index_url="https://download.pytorch.org/whl/nightly/cpu",
)


@pytest.mark.parametrize(
    "text",
    ["pip:torch==2.13.0", "installed", "nightly", "pip:torch==2.14.1",
     "pip:torch==2.14.1@@https://pypi.example.org/simple",
     "pip:torch==2.15.0.dev20261126+cpu@@https://download.pytorch.org/whl/nightly/cpu"],
)
def test_configured_specs_nightly_and_exact_pins_on_the_configured_index_pass(text: str) -> None:
    spec = parse_spec(text, pip_index_url=POLICY.pip_index_url)
    assert refusal(spec, POLICY) is None


@pytest.mark.parametrize(
    "text",
    [
        "path:/tmp/evil",
        "wheel:https://evil.example/torch-9.9-py3-none-any.whl",
        "wheel:/tmp/torch-2.13.0-cp311-cp311-linux_x86_64.whl",
        "pip:torch==2.14.1@@https://evil.example/simple",
        "pip:torch @ https://evil.example/torch-9.9-py3-none-any.whl",
        "pip:torch>=2.0",
        "pip:torch==2.*",
        "pip:torch[evil]==2.13.0",
        "pip:torch==2.13.0; python_version > '3'",
    ],
)
def test_everything_else_is_cli_only(text: str) -> None:
    spec = parse_spec(text, pip_index_url=POLICY.pip_index_url)
    reason = refusal(spec, POLICY)
    assert reason is not None and repr(text) in reason
    assert "OOTCI_API_ALLOW_ANY_TORCH_SPEC" in reason


def test_the_operator_can_allow_any_spec() -> None:
    permissive = CallerPolicy(POLICY.configured_specs, POLICY.pip_index_url, allow_any=True)
    assert refusal(parse_spec("path:/tmp/evil"), permissive) is None
