"""What torch.utils.generate_methods_for_privateuse1_backend generates for the device."""

import pytest
import torch

pytestmark = pytest.mark.conformance("stub", "recommended")


def test_tensor_is_device_property(dut):
    t = torch.zeros(2, device=dut.device)
    assert getattr(t, f"is_{dut.name}") is True
    assert getattr(torch.zeros(2), f"is_{dut.name}") is False


def test_tensor_to_device_method(dut):
    t = getattr(torch.arange(3.0), dut.name)()
    assert t.device == dut.device
    assert torch.equal(t.cpu(), torch.arange(3.0))


def test_module_to_device_method(dut):
    m = getattr(torch.nn.Linear(2, 2), dut.name)()
    assert m.weight.device == dut.device


def test_untyped_storage_method(dut):
    s = getattr(torch.arange(4, dtype=torch.uint8).untyped_storage(), dut.name)()
    assert s.device.type == dut.name
    assert getattr(s, f"is_{dut.name}")
