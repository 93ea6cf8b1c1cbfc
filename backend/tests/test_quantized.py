"""Per-tensor affine quantized tensors (qint8, quint8) on openreg follow CPU."""

from __future__ import annotations

import warnings

import pytest
import torch
from conftest import DEVICE_TYPE

# torch >= 2.13 deprecates quantized tensor creation; the API still works.
pytestmark = pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")

QTYPES = [(torch.qint8, -3), (torch.quint8, 128)]


@pytest.mark.parametrize("qtype,zero_point", QTYPES)
def test_quantize_dequantize_matches_cpu(qtype, zero_point):
    # Wide enough that some values clamp. No exact ties of x / scale: CPU's own
    # kernels round those differently between builds (2.13 CPU wheel: zero point
    # added before rounding; 2.14 CUDA wheel: after).
    x = torch.randn(3, 4, 5) * 8
    q = torch.quantize_per_tensor(x.to(DEVICE_TYPE), 0.1, zero_point, qtype)
    ref = torch.quantize_per_tensor(x, 0.1, zero_point, qtype)
    assert q.device == torch.device(DEVICE_TYPE, 0) and q.dtype == qtype and q.is_quantized
    assert (q.q_scale(), q.q_zero_point(), q.qscheme()) == (0.1, zero_point, torch.per_tensor_affine)
    assert torch.equal(q.int_repr().cpu(), ref.int_repr())
    deq = q.dequantize()
    assert deq.device.type == DEVICE_TYPE and deq.dtype == torch.float32
    torch.testing.assert_close(deq.cpu(), ref.dequantize())


@pytest.mark.parametrize("qtype,zero_point", QTYPES)
def test_quantized_tensors_move_between_cpu_and_devices(qtype, zero_point, two_devices):
    ref = torch.quantize_per_tensor(torch.randn(6) * 4, 0.05, zero_point, qtype)
    on_device = ref.to(two_devices[0])
    assert on_device.device == two_devices[0] and on_device.q_scale() == 0.05
    on_other = on_device.to(two_devices[1])
    assert on_other.device == two_devices[1]
    back = on_other.cpu()
    assert back.dtype == qtype and back.q_zero_point() == zero_point
    assert torch.equal(back.int_repr(), ref.int_repr())


def test_quantized_strided_views_dequantize_correctly():
    x = torch.randn(4, 6)
    q = torch.quantize_per_tensor(x.to(DEVICE_TYPE), 0.02, 0, torch.qint8)
    ref = torch.quantize_per_tensor(x, 0.02, 0, torch.qint8)
    torch.testing.assert_close(q.int_repr()[:, ::2].cpu(), ref.int_repr()[:, ::2])
    torch.testing.assert_close(q.dequantize().t().cpu(), ref.dequantize().t())


def test_quantize_rejects_what_cpu_rejects_clearly():
    x = torch.randn(3, device=DEVICE_TYPE)
    with pytest.raises(RuntimeError, match="qint8 and torch.quint8"):
        torch.quantize_per_tensor(x, 0.1, 0, torch.qint32)
    with pytest.raises(RuntimeError, match="zero_point 300 is out of range"):
        torch.quantize_per_tensor(x, 0.1, 300, torch.quint8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = torch.quantize_per_tensor(x, 0.1, 0, torch.qint8)
    with pytest.raises(RuntimeError, match="dequantize it first"):
        q.to(torch.quint8)
