"""Autocast on openreg (AutocastPrivateUse1): matmuls in the lower precision
dtype, float32 ops in float32, everything else untouched; values as CPU's
autocast gives them."""

from __future__ import annotations

import pytest
import torch


LOWER = [torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", LOWER)
def test_matmul_family_runs_in_the_autocast_dtype(dtype):
    a, b = torch.randn(8, 4), torch.randn(4, 3)
    bias = torch.randn(3)
    ad, bd, biasd = a.to("openreg"), b.to("openreg"), bias.to("openreg")
    with torch.autocast("openreg", dtype=dtype):
        outs = {
            "mm": ad @ bd,
            "addmm": torch.addmm(biasd, ad, bd),
            "linear": torch.nn.functional.linear(ad, bd.t(), biasd),
            "bmm": torch.bmm(ad[None], bd[None]),
        }
    for name, out in outs.items():
        assert out.dtype == dtype, name
    expected = (a.to(dtype) @ b.to(dtype)).float()
    torch.testing.assert_close(outs["mm"].float().cpu(), expected)


def test_float32_policy_ops_upcast():
    x = torch.randn(6).to("openreg")
    with torch.autocast("openreg", dtype=torch.bfloat16):
        h = x @ torch.eye(6, device="openreg")  # bfloat16
        assert h.dtype == torch.bfloat16
        assert torch.exp(h).dtype == torch.float32
        assert torch.softmax(h, 0).dtype == torch.float32
        assert h.sum().dtype == torch.float32


def test_ops_outside_the_lists_fall_through_unchanged():
    x = torch.randn(5).to("openreg")
    with torch.autocast("openreg", dtype=torch.float16):
        y = x + 1
        z = torch.relu(x)
    assert y.dtype == torch.float32 and z.dtype == torch.float32


def test_autocast_disabled_and_outside_scope():
    a = torch.randn(3, 3).to("openreg")
    with torch.autocast("openreg", dtype=torch.float16, enabled=False):
        assert (a @ a).dtype == torch.float32
    with torch.autocast("openreg", dtype=torch.float16):
        assert torch.is_autocast_enabled("openreg")
        with torch.autocast("openreg", enabled=False):
            assert (a @ a).dtype == torch.float32
    assert not torch.is_autocast_enabled("openreg")
    assert (a @ a).dtype == torch.float32


def test_autocast_does_not_touch_cpu_tensors():
    a = torch.randn(3, 3)
    with torch.autocast("openreg", dtype=torch.float16):
        assert (a @ a).dtype == torch.float32


def test_default_autocast_dtype_is_supported_by_the_device_module():
    dtype = torch.get_autocast_dtype("openreg")
    assert dtype in torch.openreg.get_amp_supported_dtype()
    with torch.autocast("openreg"):
        out = torch.ones(2, 2, device="openreg") @ torch.ones(2, 2, device="openreg")
    assert out.dtype == dtype


def test_backward_through_autocast_gives_float32_grads():
    w = torch.randn(4, 4, device="openreg", requires_grad=True)
    x = torch.randn(2, 4, device="openreg")
    with torch.autocast("openreg", dtype=torch.bfloat16):
        loss = (x @ w).float().pow(2).sum()
    loss.backward()
    assert w.grad.dtype == torch.float32
    w_cpu = w.detach().cpu().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = (x.cpu() @ w_cpu).float().pow(2).sum()
    ref.backward()
    torch.testing.assert_close(w.grad.cpu(), w_cpu.grad, rtol=2e-2, atol=2e-2)
