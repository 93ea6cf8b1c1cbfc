"""Helpers shared by the operator tests: run the same function on CPU and on
openreg and compare, and observe which path (native kernel or CPU fallback)
an op took through the backend's counters."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

import torch_openreg  # noqa: F401
from conftest import DEVICE_MODULE, DEVICE_TYPE

C = torch_openreg._C


def to_device(value: Any, device: str | torch.device = DEVICE_TYPE) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    return value


def to_cpu(value: Any) -> Any:
    return to_device(value, "cpu")


def assert_matches_cpu(fn: Callable[..., Any], *args: Any, **tol: Any) -> Any:
    """fn(*args) on openreg equals fn(*args) on CPU (values, dtypes, shapes)."""
    expected = fn(*args)
    actual = fn(*to_device(args))
    torch.testing.assert_close(to_cpu(actual), expected, **tol)
    return actual


class PathCounter:
    """Native launches and CPU fallbacks seen while the block ran."""

    native: int
    fallback: int


@contextlib.contextmanager
def count_paths() -> Iterator[PathCounter]:
    counter = PathCounter()
    before = C._kernel_counters()
    yield counter
    DEVICE_MODULE.synchronize()
    after = C._kernel_counters()
    counter.native = after["native_launches"] - before["native_launches"]
    counter.fallback = after["cpu_fallbacks"] - before["cpu_fallbacks"]


@contextlib.contextmanager
def native_kernels(enabled: bool) -> Iterator[None]:
    previous = C._native_kernels_enabled()
    C._set_native_kernels_enabled(enabled)
    try:
        yield
    finally:
        C._set_native_kernels_enabled(previous)
