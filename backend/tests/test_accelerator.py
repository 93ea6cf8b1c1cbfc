"""torch.accelerator end to end with openreg as the accelerator."""

import pytest
import torch


def test_current_accelerator_is_openreg():
    assert torch.accelerator.is_available()
    acc = torch.accelerator.current_accelerator()
    assert acc is not None and acc.type == "openreg"
    assert torch.accelerator.device_count() == torch.openreg.device_count()


def test_set_device_index(two_devices):
    torch.accelerator.set_device_index(1)
    assert torch.accelerator.current_device_index() == 1
    assert torch.openreg.current_device() == 1
    torch.accelerator.set_device_index(0)
    assert torch.openreg.current_device() == 0


@pytest.mark.skipif(not hasattr(torch.accelerator, "device_index"), reason="torch.accelerator.device_index absent")
def test_device_index_context(two_devices):
    with torch.accelerator.device_index(1):
        assert torch.openreg.current_device() == 1
    assert torch.openreg.current_device() == 0


def test_streams_through_accelerator(device):
    s = torch.Stream(device="openreg")
    torch.accelerator.set_stream(s)
    assert torch.accelerator.current_stream() == s
    assert torch.openreg.current_stream() == s
    torch.accelerator.set_stream(torch.openreg.default_stream())
    torch.accelerator.synchronize()


def test_accelerator_memory_apis(device):
    if not hasattr(torch.accelerator, "memory_allocated"):
        pytest.skip("torch.accelerator memory APIs absent in this release")
    base = torch.accelerator.memory_allocated()
    t = torch.empty(1 << 20, dtype=torch.uint8, device=device)
    assert torch.accelerator.memory_allocated() == base + (1 << 20)
    assert torch.accelerator.memory_allocated() == torch.openreg.memory_allocated()
    assert torch.accelerator.memory_reserved() == torch.openreg.memory_reserved()
    stats = torch.accelerator.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.openreg.memory_allocated()
    torch.accelerator.reset_peak_memory_stats()
    assert torch.accelerator.max_memory_allocated() == torch.accelerator.memory_allocated()
    del t
    torch.accelerator.empty_cache()
    assert torch.openreg.memory_reserved() == torch.openreg.memory_allocated()


def test_pin_memory_targets_the_accelerator(device):
    p = torch.empty(16, pin_memory=True)
    assert p.is_pinned()
    x = p.fill_(3.0).to(device, non_blocking=True)
    torch.accelerator.synchronize()
    assert torch.equal(x.cpu(), torch.full((16,), 3.0))


def test_generic_events_with_timing(device):
    a = torch.Event(device="openreg", enable_timing=True)
    b = torch.Event(device="openreg", enable_timing=True)
    a.record()
    torch.ones(1000, device=device).sum()
    b.record()
    b.synchronize()
    assert a.elapsed_time(b) >= 0
