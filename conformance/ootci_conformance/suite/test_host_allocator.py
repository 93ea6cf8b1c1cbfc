"""Pinned host memory for the device (the host allocator)."""

import pytest
import torch

pytestmark = pytest.mark.conformance("host_allocator", "recommended")


def test_pinned_empty_is_pinned(dut):
    assert torch.empty(1000, pin_memory=True).is_pinned()


def test_pin_memory_keeps_values(dut):
    q = torch.arange(10.0).pin_memory()
    assert q.is_pinned()
    assert torch.equal(q, torch.arange(10.0))
    assert not torch.arange(3.0).is_pinned()


def test_non_blocking_copy_from_pinned_memory(dut):
    host = torch.arange(4096.0).pin_memory()
    on_device = host.to(dut.device, non_blocking=True)
    torch.accelerator.synchronize()
    assert torch.equal(on_device.cpu(), torch.arange(4096.0))
