"""The device guard: the current device, switched and restored by torch's generic guards."""

import pytest
import torch

pytestmark = pytest.mark.conformance("guard", "required")


def test_current_device_starts_at_zero(dut):
    assert torch.accelerator.current_device_index() == 0


def test_torch_device_context_places_factories(dut):
    with torch.device(dut.device):
        t = torch.empty(2)
    assert t.device == dut.device


def test_set_device_changes_default_placement(dut, two_devices):
    torch.accelerator.set_device_index(1)
    try:
        assert torch.accelerator.current_device_index() == 1
        assert torch.empty(2, device=dut.name).device.index == 1
    finally:
        torch.accelerator.set_device_index(0)


def test_device_index_context_restores(dut, two_devices):
    with torch.accelerator.device_index(1):
        assert torch.accelerator.current_device_index() == 1
    assert torch.accelerator.current_device_index() == 0


def test_op_on_second_device_restores_current(dut, two_devices):
    x = torch.ones(3, device=two_devices[1])
    y = x + x
    assert y.device.index == 1
    assert torch.accelerator.current_device_index() == 0
