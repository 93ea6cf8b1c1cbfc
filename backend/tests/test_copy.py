"""Host<->device and device<->device copies (the minimal op set's data path)."""

import pytest
import torch
from conftest import DEVICE_MODULE

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
          torch.int32, torch.int8, torch.uint8, torch.bool, torch.complex64]


def _sample(dtype, shape=(3, 5)):
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=g)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(0, 100, shape, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_roundtrip_preserves_values(dtype, device):
    cpu = _sample(dtype)
    dev = cpu.to(device)
    assert dev.device == device and dev.dtype == dtype
    assert torch.equal(dev.cpu(), cpu)


def test_non_contiguous_source_and_destination(device):
    cpu = torch.arange(24.0).reshape(4, 6)
    assert torch.equal(cpu.t().to(device).cpu(), cpu.t())          # H2D from strided
    dev = cpu.to(device)
    assert torch.equal(dev[:, ::2].cpu(), cpu[:, ::2])              # D2H from strided
    dst = torch.zeros(6, 4, device=device)
    dst.t().copy_(cpu)                                              # H2D into strided
    assert torch.equal(dst.cpu(), cpu.t())
    host = torch.zeros(6, 4)
    host.t().copy_(dev)                                             # D2H into strided
    assert torch.equal(host, cpu.t())


def test_device_to_device_strided_and_dtype_conversion(device):
    cpu = torch.arange(12, dtype=torch.int64).reshape(3, 4)
    dev = cpu.to(device)
    out = torch.empty(4, 3, dtype=torch.float64, device=device)
    out.copy_(dev.t())
    assert torch.equal(out.cpu(), cpu.t().double())
    assert torch.equal(dev.t().contiguous().cpu(), cpu.t().contiguous())
    assert torch.equal(dev.clone().cpu(), cpu)


def test_broadcasting_copy(device):
    row = torch.arange(4.0)
    dst = torch.empty(3, 4, device=device)
    dst.copy_(row)
    assert torch.equal(dst.cpu(), row.expand(3, 4))
    dst2 = torch.empty(3, 4, device=device)
    dst2.copy_(row.to(device))
    assert torch.equal(dst2.cpu(), row.expand(3, 4))


def test_cross_device_copy(two_devices):
    d0, d1 = two_devices
    cpu = torch.randn(5, 7)
    a = cpu.to(d0)
    b = a.to(d1)
    assert b.device == d1
    assert torch.equal(b.cpu(), cpu)
    c = torch.empty(7, 5, device=d1)
    c.copy_(a.t())
    assert torch.equal(c.cpu(), cpu.t())


def test_pinned_non_blocking_h2d_and_d2h(device):
    src = torch.randn(1 << 16).pin_memory()
    dev = src.to(device, non_blocking=True)
    back = torch.empty(1 << 16).pin_memory()
    back.copy_(dev, non_blocking=True)
    DEVICE_MODULE.synchronize()
    assert torch.equal(back, src)


def test_non_blocking_pageable_copy_is_still_correct(device):
    src = torch.randn(1000)
    dev = src.to(device, non_blocking=True)
    del src  # pageable host memory may go away: the copy must not depend on it
    assert dev.cpu().shape == (1000,)


def test_item_for_several_dtypes(device):
    assert torch.tensor(3.5, device=device).item() == 3.5
    assert torch.tensor(-7, device=device).item() == -7
    assert torch.tensor(True, device=device).item() is True
    assert torch.tensor([[2.25]], device=device).item() == 2.25
    with pytest.raises(RuntimeError, match="cannot be converted"):
        torch.ones(2, device=device).item()


def test_empty_tensors(device):
    e = torch.empty(0, 3, device=device)
    assert e.cpu().shape == (0, 3)
    assert torch.zeros(0).to(device).numel() == 0


def test_resize_grows_storage_and_keeps_prefix(device):
    t = torch.arange(4.0).to(device)
    t.resize_(2, 4)
    assert t.shape == (2, 4)
    assert torch.equal(t.flatten()[:4].cpu(), torch.arange(4.0))
    t.resize_(2)
    assert torch.equal(t.cpu(), torch.arange(2.0))


def test_storage_resize_through_hooks(device):
    t = torch.arange(3.0).to(device)
    s = t.untyped_storage()
    s.resize_(32)
    assert s.nbytes() == 32
    assert torch.equal(torch.empty(0, device=device).set_(s)[:3].cpu(), torch.arange(3.0))


def test_set_overloads_share_storage(device):
    base = torch.arange(6.0).to(device)
    view = torch.empty(0, device=device)
    view.set_(base.untyped_storage(), 2, (2, 2), (2, 1))
    assert torch.equal(view.cpu(), torch.tensor([[2.0, 3.0], [4.0, 5.0]]))
    alias = torch.empty(0, device=device).set_(base)
    alias.add_(1)  # in-place through the alias is seen by the original
    assert torch.equal(base.cpu(), torch.arange(6.0) + 1)
    whole = torch.empty(0, device=device).set_(base.untyped_storage())
    assert whole.shape == (6,)


def test_views_are_metadata_only(device):
    t = torch.arange(12.0).to(device)
    v = t.view(3, 4)
    assert v.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    s = t.as_strided((2, 2), (1, 2), 1)
    assert torch.equal(s.cpu(), torch.arange(12.0).as_strided((2, 2), (1, 2), 1))
    r = v.t().reshape(12)  # needs a copy: non-viewable
    assert torch.equal(r.cpu(), torch.arange(12.0).view(3, 4).t().reshape(12))
