"""Whether a find_package(Torch) build can use a torch: CUDA builds and the toolkit."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.pipeline.steps.torch_check import CUDA_LIBRARIES, cuda_toolkit, is_cuda_torch


@pytest.mark.parametrize(("version", "url", "cuda"), [
    ("2.13.0+cpu", "file:///opt/wheels/torch-2.13.0%2Bcpu-cp311-cp311-linux_x86_64.whl", False),
    ("2.13.0+cu130", "https://download.pytorch.org/whl/cu130/torch.whl", True),
    ("2.13.0", "https://files.pythonhosted.org/packages/torch-2.13.0-cp311-manylinux.whl", True),
    ("2.13.0", "file:///srv/wheels/torch-2.13.0-cp311-none-any.whl", False),
])
def test_cuda_builds_are_told_from_their_version_and_origin(
    version: str, url: str, cuda: bool
) -> None:
    assert is_cuda_torch(version, url) is cuda


def _toolkit(root: Path, libraries: tuple[str, ...]) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "nvcc").write_text("")
    (root / "include").mkdir()
    (root / "include" / "cuda_runtime.h").write_text("")
    (root / "lib64").mkdir()
    for lib in libraries:
        (root / "lib64" / f"lib{lib}.so").write_text("")
    return root


def test_a_toolkit_without_the_libraries_torch_links_is_not_usable(tmp_path: Path) -> None:
    home = _toolkit(tmp_path / "cuda", ("cudart",))
    found = cuda_toolkit({"CUDA_HOME": str(home), "PATH": ""})
    assert not found.usable
    assert "libcublas.so" in found.missing and "libcudart.so" not in found.missing


def test_a_complete_toolkit_is_usable_and_no_nvcc_is_said(tmp_path: Path) -> None:
    home = _toolkit(tmp_path / "cuda", CUDA_LIBRARIES)
    assert cuda_toolkit({"CUDA_HOME": str(home), "PATH": ""}).usable
    assert cuda_toolkit({"PATH": str(tmp_path / "empty")}).missing == ("nvcc",)
