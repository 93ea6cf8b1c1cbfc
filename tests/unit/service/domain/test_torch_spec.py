"""Torch spec parsing: every kind, and an error naming the problem for everything else."""

from __future__ import annotations

import pytest

from service.domain.torch_spec import (
    DEFAULT_NIGHTLY_INDEX,
    SourceKind,
    TorchSpec,
    TorchSpecError,
    parse_spec,
)
from workers.pipeline.env import resolve
from workers.pipeline.errors import UsageError


def test_installed() -> None:
    assert parse_spec(" installed ") == TorchSpec("installed", "installed")


def test_pip_requirement_without_index_uses_the_configured_default() -> None:
    assert parse_spec("pip:torch==2.13.0") == TorchSpec("pip:torch==2.13.0", "pip", "torch==2.13.0")
    spec = parse_spec("pip:torch==2.13.0", pip_index_url="https://mirror.example/simple/")
    assert spec.index_url == "https://mirror.example/simple"


def test_pip_requirement_with_its_own_index() -> None:
    spec = parse_spec(
        "pip:torch>=2.14.0.dev0@@https://download.pytorch.org/whl/nightly/cpu",
        pip_index_url="https://ignored.example/simple",
    )
    assert spec.kind == "pip"
    assert spec.requirement == "torch>=2.14.0.dev0"
    assert spec.index_url == "https://download.pytorch.org/whl/nightly/cpu"


def test_pip_direct_reference_keeps_its_single_at() -> None:
    spec = parse_spec("pip:torch @ https://example.org/torch-2.13.0-py3-none-any.whl")
    assert spec.requirement == "torch @ https://example.org/torch-2.13.0-py3-none-any.whl"
    assert spec.index_url == ""


def test_nightly_takes_the_configured_index() -> None:
    assert parse_spec("nightly").index_url == DEFAULT_NIGHTLY_INDEX
    spec = parse_spec("nightly", nightly_index_url="http://127.0.0.1:8000/simple/")
    assert spec == TorchSpec("nightly", "nightly", "torch", "http://127.0.0.1:8000/simple")


def test_wheel_and_path() -> None:
    assert parse_spec("wheel:/opt/wheels/torch-2.13.0-cp311-cp311-linux_x86_64.whl").location == (
        "/opt/wheels/torch-2.13.0-cp311-cp311-linux_x86_64.whl"
    )
    assert parse_spec("wheel:https://h.example/t/torch-2.13.0-py3-none-any.whl").kind == "wheel"
    assert parse_spec("path:/tmp/overlay") == TorchSpec(
        "path:/tmp/overlay", "path", location="/tmp/overlay"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("foo", "unknown torch spec kind 'foo': expected one of installed, pip:<requirement>"),
        ("conda:torch", "unknown torch spec kind 'conda'"),
        ("", "empty torch spec"),
        ("pip:", "pip: needs an argument"),
        ("pip:torch==", "not a pip requirement"),
        ("pip:numpy==2.0", "must be for torch"),
        ("pip:torch==2.13.0@@", "nothing after @@"),
        ("pip:torch==2.13.0@@not-a-url", "is not an http(s):// or file:// URL"),
        ("wheel:/tmp/torch.tar.gz", "ends in .whl"),
        ("path:", "path: needs an argument"),
        ("installed:now", "takes no argument"),
        ("nightly:2026", "takes a date, YYYY-MM-DD"),
    ],
)
def test_bad_specs_name_the_problem(text: str, message: str) -> None:
    pattern = message.replace("(", r"\(").replace(")", r"\)")
    with pytest.raises(TorchSpecError, match=pattern):
        parse_spec(text)
    # In the pipeline the same refusal is a usage error: the CLI exits 2 and stores nothing.
    with pytest.raises(UsageError, match=pattern) as info:
        resolve.parse_spec(text)
    assert info.value.kind == "usage"


def test_kind_is_the_source_kind_enum() -> None:
    assert parse_spec("nightly").kind is SourceKind.NIGHTLY
    assert resolve.parse_spec("path:/tmp/overlay").kind is SourceKind.PATH
