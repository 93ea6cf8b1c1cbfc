"""CPU fallback: the per-op fallback of sub.Tensor, ops without native
kernels, unsupported dtypes, and the native kernels' own fallback path."""

from __future__ import annotations

import pytest
import torch

from _ops_util import assert_matches_cpu, count_paths, native_kernels
from conftest import DEVICE_TYPE


def test_sub_tensor_is_a_registered_per_op_fallback():
    a, b = torch.randn(4, 5), torch.randn(5)
    with count_paths() as paths:
        out = assert_matches_cpu(torch.sub, a, b)
    assert paths.fallback == 1 and paths.native == 0
    # The result lives on the device of the inputs, not on the CPU.
    assert out.device.type == DEVICE_TYPE


def test_sub_in_place_and_out_stay_native():
    a, b = torch.randn(4, 5), torch.randn(5)
    with count_paths() as paths:
        assert_matches_cpu(lambda x, y: x.clone().sub_(y, alpha=2), a, b)
    assert paths.fallback == 0


def test_sub_fallback_keeps_pytorch_errors():
    t = torch.ones(2, dtype=torch.bool, device=DEVICE_TYPE)
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool"):
        torch.sub(t, t)


def test_unsupported_dtype_falls_back_with_same_results():
    a = torch.randn(8).to(torch.bfloat16)
    b = torch.randn(8).to(torch.bfloat16)
    with count_paths() as paths:
        out = assert_matches_cpu(torch.mul, a, b)
    assert out.dtype == torch.bfloat16 and paths.fallback == 1


def test_complex_goes_through_the_fallback():
    z = torch.randn(5, dtype=torch.complex64)
    assert_matches_cpu(lambda t: t * 2 + 1j, z)


def test_op_without_native_kernel_uses_the_global_fallback():
    # cumsum has no native kernel: the global boxed fallback runs it on the CPU.
    x = torch.randn(3, 4)
    out = assert_matches_cpu(lambda t: t.cumsum(1), x)
    assert out.device.type == DEVICE_TYPE


def test_in_place_op_through_fallback_mutates_the_device_tensor():
    x = torch.randn(10)
    dev = x.to(DEVICE_TYPE)
    alias = dev[2:5]
    dev.clamp_(min=0)  # no native kernel: fallback must write back in place
    torch.testing.assert_close(alias.cpu(), x.clamp(min=0)[2:5])


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, y: x + y,
        lambda x, y: (x * y).sum(dim=0),
        lambda x, y: torch.softmax(x @ y.t(), -1),
        lambda x, y: torch.where(x > 0, x, y).amax(),
        lambda x, y: x.t().contiguous().exp(),
    ],
)
def test_native_and_fallback_paths_agree(fn):
    x, y = torch.randn(6, 6, dtype=torch.float64), torch.randn(6, 6, dtype=torch.float64)
    xd, yd = x.to(DEVICE_TYPE), y.to(DEVICE_TYPE)
    native = fn(xd, yd).cpu()
    with native_kernels(False), count_paths() as paths:
        fallback = fn(xd, yd).cpu()
    assert paths.native == 0
    torch.testing.assert_close(native, fallback)
    torch.testing.assert_close(native, fn(x, y))
