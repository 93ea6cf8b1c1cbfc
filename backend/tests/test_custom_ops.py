"""openreg::custom_abs (schema, PrivateUse1/CPU/Meta kernels, autograd) and
openreg::linear_relu (a C++ torch::autograd::Function)."""

from __future__ import annotations

import pytest
import torch

from _ops_util import count_paths
from conftest import DEVICE_TYPE


def test_schema_is_registered():
    schema = torch.ops.openreg.custom_abs.default._schema
    assert str(schema) == "openreg::custom_abs(Tensor input) -> Tensor"
    assert "linear_relu" in str(torch.ops.openreg.linear_relu.default._schema)


def test_custom_abs_runs_natively_on_openreg():
    x = torch.randn(4, 5)
    with count_paths() as paths:
        out = torch.ops.openreg.custom_abs(x.to(DEVICE_TYPE))
    assert out.device.type == DEVICE_TYPE
    assert paths.native >= 1 and paths.fallback == 0
    torch.testing.assert_close(out.cpu(), x.abs())


def test_custom_abs_cpu_kernel():
    x = torch.randn(7)
    torch.testing.assert_close(torch.ops.openreg.custom_abs(x), x.abs())


def test_custom_abs_meta_kernel_infers_shape_without_data():
    m = torch.empty(3, 8, dtype=torch.float64, device="meta")
    out = torch.ops.openreg.custom_abs(m)
    assert out.device.type == "meta" and out.shape == (3, 8) and out.dtype == torch.float64


def test_custom_abs_under_fake_tensor_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fake = torch.empty(2, 3)
        out = torch.ops.openreg.custom_abs(fake)
    assert out.shape == (2, 3)


def test_custom_abs_gradient_is_sign():
    x = torch.tensor([-2.0, -0.5, 0.0, 1.5])
    xd = x.to(DEVICE_TYPE).requires_grad_()
    torch.ops.openreg.custom_abs(xd).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), torch.tensor([-1.0, -1.0, 0.0, 1.0]))


def test_custom_abs_gradcheck_on_device():
    x = torch.randn(5, dtype=torch.float64).to(DEVICE_TYPE).requires_grad_()
    assert torch.autograd.gradcheck(torch.ops.openreg.custom_abs, (x,))


def test_custom_abs_records_its_own_backward_node():
    x = torch.randn(3, device=DEVICE_TYPE, requires_grad=True)
    out = torch.ops.openreg.custom_abs(x)
    assert out.grad_fn.name().endswith("CustomAbsFunction>")


@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_relu_forward_and_backward_match_cpu_composite(with_bias):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 5, generator=g, dtype=torch.float64)
    w = torch.randn(3, 5, generator=g, dtype=torch.float64)
    b = torch.randn(3, generator=g, dtype=torch.float64) if with_bias else None

    ref_params = [t.clone().requires_grad_() for t in (x, w, b) if t is not None]
    ref = torch.relu(torch.nn.functional.linear(*ref_params))
    ref.pow(2).sum().backward()

    dev_params = [t.to(DEVICE_TYPE).requires_grad_() for t in (x, w, b) if t is not None]
    out = torch.ops.openreg.linear_relu(*dev_params)
    assert out.grad_fn.name().endswith("LinearReluFunction>")
    out.pow(2).sum().backward()

    torch.testing.assert_close(out.detach().cpu(), ref.detach())
    for dev, cpu in zip(dev_params, ref_params):
        torch.testing.assert_close(dev.grad.cpu(), cpu.grad)


def test_linear_relu_gradcheck():
    x = torch.randn(4, 3, dtype=torch.float64, device=DEVICE_TYPE, requires_grad=True)
    w = torch.randn(2, 3, dtype=torch.float64, device=DEVICE_TYPE, requires_grad=True)
    b = torch.randn(2, dtype=torch.float64, device=DEVICE_TYPE, requires_grad=True)
    assert torch.autograd.gradcheck(torch.ops.openreg.linear_relu, (x, w, b))


def test_linear_relu_rejects_bad_shapes():
    with pytest.raises(RuntimeError, match="expected 2-D input and weight"):
        torch.ops.openreg.linear_relu(torch.ones(2, 3, 4, device=DEVICE_TYPE), torch.ones(2, 4, device=DEVICE_TYPE))
