"""Native kernels: results equal CPU's for broadcasting, strides, dtypes,
scalar operands, in-place and out= forms, and they really run natively (no
CPU fallback) for the dtypes they claim."""

from __future__ import annotations

import operator

import pytest
import torch

from _ops_util import assert_matches_cpu, count_paths, native_kernels
from conftest import DEVICE_MODULE, DEVICE_TYPE

NATIVE_DTYPES = [torch.float32, torch.float64, torch.int64, torch.int32]


def make(shape, dtype, *, low=-5, high=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        return torch.rand(shape, generator=g, dtype=dtype) * (high - low) + low
    return torch.randint(low, high, shape, generator=g, dtype=dtype)


BINARY = {
    "add": operator.add,
    "mul": operator.mul,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=3),
    "sub_": lambda a, b: (a + b).sub_(b, alpha=2),
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt,
    "le": operator.le, "gt": operator.gt, "ge": operator.ge,
}


@pytest.mark.parametrize("dtype", NATIVE_DTYPES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcast_native(name, dtype):
    a, b = make((4, 1, 5), dtype), make((3, 1), dtype, seed=1)
    with count_paths() as paths:
        assert_matches_cpu(BINARY[name], a, b)
    assert paths.native >= 1 and paths.fallback == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_div_and_pow_float(dtype):
    a, b = make((6, 7), dtype), make((7,), dtype, low=0.5, high=3)
    assert_matches_cpu(operator.truediv, a, b)
    assert_matches_cpu(lambda x, y: x.abs() ** y, a, b)
    assert_matches_cpu(lambda x: x.abs() ** 2.5, a)


def test_integer_true_division_promotes_to_default_float():
    a, b = make((10,), torch.int64), make((10,), torch.int64, low=1, high=4)
    out = assert_matches_cpu(operator.truediv, a, b)
    assert out.dtype == torch.get_default_dtype()


def test_type_promotion_between_tensors_and_python_scalars():
    i, f = make((5,), torch.int32), make((5,), torch.float64)
    assert assert_matches_cpu(operator.add, i, f).dtype == torch.float64
    assert assert_matches_cpu(lambda x: x * 2, i).dtype == torch.int32
    assert assert_matches_cpu(lambda x: x * 2.5, i).dtype == torch.float32
    assert assert_matches_cpu(lambda x: 2 - x, i).dtype == torch.int32
    assert assert_matches_cpu(lambda x: x > 1.5, i).dtype == torch.bool


def test_cpu_zero_dim_tensor_operand_on_either_side():
    x, s = make((3, 4), torch.float32), torch.tensor(1.5)
    assert_matches_cpu(lambda a: torch.sub(a, s), x)
    assert_matches_cpu(lambda a: torch.div(s, a), x)


def test_non_contiguous_operands():
    a = make((8, 6), torch.float32)
    b = make((6, 8), torch.float32, seed=3)
    assert_matches_cpu(lambda x, y: x + y.t(), a, b)
    assert_matches_cpu(lambda x: x[::2, 1::2] * 3, a)
    assert_matches_cpu(lambda x: x.expand(3, 8, 6) - 1, a)


def test_in_place_and_out_forms():
    a, b = make((4, 5), torch.float32), make((5,), torch.float32, seed=2)

    def in_place(x, y):
        z = x.clone()
        z.mul_(y).add_(y, alpha=-2).div_(y)
        return z

    assert_matches_cpu(in_place, a, b)

    def out_form(x, y):
        out = torch.empty(0, dtype=x.dtype, device=x.device)
        torch.add(x, y, out=out)  # resized from 0 elements
        return out

    assert_matches_cpu(out_form, a, b)


def test_comparison_out_of_other_dtype_casts():
    a, b = make((6,), torch.float32), make((6,), torch.float32, seed=4)

    def fn(x, y):
        out = torch.empty(6, dtype=torch.float32, device=x.device)
        return torch.lt(x, y, out=out)

    assert_matches_cpu(fn, a, b)


def test_errors_match_cpu_semantics():
    i = torch.arange(4).to(DEVICE_TYPE)
    with pytest.raises(RuntimeError, match="result type Float can't be cast"):
        i.add_(torch.ones(4, device=DEVICE_TYPE))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        torch.ones(3, device=DEVICE_TYPE).add_(torch.ones(2, 3, device=DEVICE_TYPE))
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool"):
        torch.ones(2, dtype=torch.bool, device=DEVICE_TYPE) - torch.ones(2, dtype=torch.bool, device=DEVICE_TYPE)


def test_cross_device_binary_op_raises(two_devices):
    d0, d1 = two_devices
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(2, device=d0) + torch.ones(2, device=d1)


UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "relu": torch.relu,
    "sigmoid": torch.sigmoid, "tanh": torch.tanh,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_unary_float(name, dtype):
    x = make((33, 17), dtype)
    with count_paths() as paths:
        assert_matches_cpu(UNARY[name], x)
    assert paths.fallback == 0


def test_log_sqrt_of_negative_give_nan_like_cpu():
    x = torch.tensor([-1.0, 0.0, 0.25, 4.0])
    assert_matches_cpu(torch.log, x, equal_nan=True)
    assert_matches_cpu(torch.sqrt, x, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_unary_integer(dtype):
    x = make((20,), dtype)
    assert_matches_cpu(torch.neg, x)
    assert_matches_cpu(torch.abs, x)
    assert_matches_cpu(torch.relu, x)
    assert assert_matches_cpu(torch.exp, x).dtype == torch.float32


def test_relu_keeps_nan():
    assert_matches_cpu(torch.relu, torch.tensor([float("nan"), -1.0, 2.0]), equal_nan=True)


def test_abs_goes_through_the_dispatch_stub_natively():
    x = make((100,), torch.float32)
    with count_paths() as paths:
        assert_matches_cpu(torch.abs, x)
        assert_matches_cpu(lambda t: t.clone().abs_(), x)
    assert paths.native >= 2 and paths.fallback == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_fill_and_zero(dtype):
    x = make((4, 6), dtype)
    assert_matches_cpu(lambda t: t.clone().fill_(1), x)
    assert_matches_cpu(lambda t: t.clone().zero_(), x)
    assert_matches_cpu(lambda t: t.clone()[:, ::2].fill_(True if dtype == torch.bool else 7), x)


def test_fill_with_device_scalar_tensor():
    x = torch.zeros(3, 3)
    v = torch.tensor(2.5)
    out = x.to(DEVICE_TYPE).fill_(v.to(DEVICE_TYPE))
    torch.testing.assert_close(out.cpu(), x.fill_(v))


def test_fill_out_of_range_value_raises_like_cpu():
    with pytest.raises(RuntimeError, match="value cannot be converted"):
        torch.zeros(2, dtype=torch.int32, device=DEVICE_TYPE).fill_(2**40)


@pytest.mark.parametrize("src_dtype", [torch.float32, torch.float64, torch.int64, torch.int32, torch.bool])
@pytest.mark.parametrize("dst_dtype", [torch.float32, torch.int64, torch.bool])
def test_device_copy_converts_dtypes_natively(src_dtype, dst_dtype):
    src = make((5, 7), src_dtype)
    with count_paths() as paths:
        assert_matches_cpu(lambda t: t.to(dst_dtype, copy=True), src)
    assert paths.native >= 1 and paths.fallback == 0


def test_device_copy_non_contiguous_and_broadcast():
    src = make((6, 4), torch.float32)
    assert_matches_cpu(lambda t: t.t().contiguous(), src)

    def broadcast(t):
        dst = torch.empty(3, 6, 4, dtype=torch.float64, device=t.device)
        return dst.copy_(t)

    assert_matches_cpu(broadcast, src)

    def into_strided(t):
        dst = torch.zeros(6, 8, device=t.device)
        dst[:, ::2].copy_(t)
        return dst

    assert_matches_cpu(into_strided, src)


REDUCTIONS = {
    "sum": torch.sum,
    "sum_dim": lambda x: x.sum(dim=1),
    "sum_dims_keepdim": lambda x: x.sum(dim=(0, 2), keepdim=True),
    "mean": lambda x: x.mean(),
    "mean_dim": lambda x: x.mean(dim=-1),
    "amax": lambda x: x.amax(dim=(1, 2)),
    "max": torch.max,
    "max_dim_values": lambda x: x.max(dim=1).values,
    "max_dim_indices": lambda x: x.max(dim=1).indices,
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions_float(name):
    x = make((5, 6, 7), torch.float64)
    with count_paths() as paths:
        assert_matches_cpu(REDUCTIONS[name], x)
        assert_matches_cpu(REDUCTIONS[name], x.transpose(0, 2).contiguous().transpose(0, 2))
    assert paths.fallback == 0


def test_large_full_sum_splits_across_threads_and_stays_accurate():
    x = make((1 << 20,), torch.float32)
    assert_matches_cpu(torch.sum, x, rtol=1e-5, atol=1e-3)
    assert_matches_cpu(lambda t: t.sum(dim=0), x.view(1024, 1024), rtol=1e-5, atol=1e-4)


def test_full_sum_is_bitwise_reproducible():
    # The two threads claim chunks in whatever order they are scheduled; partial
    # sums must still be combined in index order, as a deterministic reduction.
    # Magnitudes spread over 16 decades make the combine order show in the
    # last bits (8 distinct results over 200 shuffled orders on CPU).
    g = torch.Generator().manual_seed(1)
    n = 1 << 21
    x = torch.randn(n, generator=g, dtype=torch.float64)
    x = x * torch.pow(10, torch.rand(n, generator=g, dtype=torch.float64) * 16 - 8)
    on_device = x.to(DEVICE_TYPE)
    results = {on_device.sum().item() for _ in range(100)}
    assert len(results) == 1


def test_integer_sum_promotes_to_int64():
    x = make((10, 3), torch.int32)
    assert assert_matches_cpu(lambda t: t.sum(0), x).dtype == torch.int64
    b = make((10,), torch.bool)
    assert assert_matches_cpu(torch.sum, b).dtype == torch.int64


def test_sum_with_dtype_and_out():
    x = make((4, 4), torch.float32)
    assert assert_matches_cpu(lambda t: t.sum(dtype=torch.float64), x).dtype == torch.float64

    def out_form(t):
        out = torch.empty(0, dtype=torch.float32, device=t.device)
        return torch.sum(t, 1, out=out)

    assert_matches_cpu(out_form, x)


def test_max_propagates_nan_and_takes_first_index():
    x = torch.tensor([[1.0, float("nan"), 3.0], [2.0, 5.0, 5.0]])
    assert_matches_cpu(torch.max, x, equal_nan=True)
    assert_matches_cpu(lambda t: t.max(dim=1), x, equal_nan=True)
    assert_matches_cpu(lambda t: t.amax(dim=0), x, equal_nan=True)


def test_max_of_empty_raises_like_cpu():
    with pytest.raises(RuntimeError, match="numel"):
        torch.empty(0, device=DEVICE_TYPE).max()


def test_mean_of_integers_raises_like_cpu():
    with pytest.raises(RuntimeError, match="mean"):
        torch.arange(3, device=DEVICE_TYPE).mean()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mm_addmm_bmm(dtype):
    a, b = make((17, 9), dtype), make((9, 13), dtype, seed=1)
    bias = make((13,), dtype, seed=2)
    batch1, batch2 = make((3, 4, 5), dtype, seed=3), make((3, 5, 2), dtype, seed=4)
    with count_paths() as paths:
        assert_matches_cpu(torch.mm, a, b)
        assert_matches_cpu(torch.mm, b.t(), a.t())
        assert_matches_cpu(lambda c, x, y: torch.addmm(c, x, y, beta=0.5, alpha=2), bias, a, b)
        assert_matches_cpu(torch.bmm, batch1, batch2)
        assert_matches_cpu(torch.nn.functional.linear, a, b.t(), bias)
    assert paths.native >= 5 and paths.fallback == 0


def test_mm_shape_mismatch_raises():
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.ones(2, 3, device=DEVICE_TYPE) @ torch.ones(2, 3, device=DEVICE_TYPE)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("fn", [torch.softmax, torch.log_softmax])
def test_softmax_forward_and_backward(fn, dim):
    x = make((7, 33, 5), torch.float32, low=-20, high=20)
    with count_paths() as paths:
        assert_matches_cpu(lambda t: fn(t, dim), x)
    assert paths.fallback == 0

    def grad(t):
        t = t.clone().requires_grad_()
        fn(t, dim).mul(torch.arange(5.0, device=t.device)).sum().backward()
        return t.grad

    assert_matches_cpu(grad, x)


def test_softmax_extreme_values():
    x = torch.tensor([[0.0, -float("inf"), 1.0], [100.0, 100.0, -100.0], [-1e4, 0.0, 1e4]])
    assert_matches_cpu(lambda t: torch.softmax(t, -1), x)
    assert_matches_cpu(lambda t: torch.log_softmax(t, -1), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_where(dtype):
    cond = make((4, 1, 6), torch.bool)
    a, b = make((5, 6), dtype, seed=1), make((6,), dtype, seed=2)
    with count_paths() as paths:
        assert_matches_cpu(torch.where, cond, a, b)
    assert paths.fallback == 0
    if dtype != torch.bool:
        assert_matches_cpu(lambda c, x: torch.where(c, x, 0), cond, a)


def test_index_with_integer_tensor():
    x = make((5, 6, 3), torch.float32)
    idx = torch.tensor([[4, 0], [-1, 2]])
    with count_paths() as paths:
        assert_matches_cpu(lambda t, i: t[i], x, idx)
        assert_matches_cpu(lambda t, i: t[:, i], x, idx.to(torch.int32))
    assert paths.fallback == 0
    # CPU index tensors are accepted for device tensors, as with CUDA.
    cpu_idx = torch.tensor([2, -3, 0])
    torch.testing.assert_close(x.to(DEVICE_TYPE)[:, :, cpu_idx].cpu(), x[:, :, cpu_idx])


def test_index_out_of_bounds_raises_index_error():
    x = torch.ones(4, 2, device=DEVICE_TYPE)
    with pytest.raises(IndexError, match="out of bounds"):
        x[torch.tensor([1, 4], device=DEVICE_TYPE)]


def test_boolean_mask_index_uses_fallback_and_matches():
    x = make((6, 2), torch.float32)
    mask = x[:, 0] > 0
    with count_paths() as paths:
        assert_matches_cpu(lambda t, m: t[m], x, mask)
    assert paths.fallback >= 1


def test_native_switch_routes_everything_to_the_cpu_fallback():
    a, b = make((64,), torch.float32), make((64,), torch.float32, seed=1)
    with native_kernels(False), count_paths() as paths:
        assert_matches_cpu(lambda x, y: (x * y + x).sum(), a, b)
    assert paths.native == 0 and paths.fallback >= 3


def test_native_switch_from_environment(python):
    proc = python(
        """
        import torch, torch_openreg
        print(torch_openreg._C._native_kernels_enabled())
        x = torch.ones(3, device="openreg") + 1
        print(x.cpu().tolist())
        """,
        env={"OPENREG_NATIVE_KERNELS": "0"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["False", "[2.0, 2.0, 2.0]"]


def test_kernels_run_on_the_current_stream():
    s = DEVICE_MODULE.Stream()
    x = torch.ones(1 << 16, device=DEVICE_TYPE)
    # As with CUDA, work on another stream is unordered with the producer
    # of x until the stream waits for it.
    s.wait_stream(DEVICE_MODULE.current_stream())
    with DEVICE_MODULE.stream(s):
        y = x * 3
    s.synchronize()
    assert torch.equal(y.cpu(), torch.full((1 << 16,), 3.0))
