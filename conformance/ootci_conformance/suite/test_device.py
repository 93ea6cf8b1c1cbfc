"""The device type itself: renamed PrivateUse1, a device module, tensors that live there."""

import pytest
import torch

pytestmark = pytest.mark.conformance("device", "required")


def test_privateuse1_is_renamed_to_the_device(dut):
    assert torch._C._get_privateuse1_backend_name() == dut.name


def test_device_module_reports_available_devices(dut):
    assert dut.module.is_available()
    assert dut.count >= 1


def test_empty_lives_on_the_device(dut):
    t = torch.empty(3, device=dut.name)
    assert t.device == torch.device(dut.name, 0)
    assert t.shape == (3,)


def test_privateuseone_reaches_the_same_backend(dut):
    assert torch.empty(2, device="privateuseone").device.type == dut.name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool])
def test_copy_to_device_and_back_keeps_values(dut, dtype):
    host = torch.arange(12).reshape(3, 4).to(dtype)
    on_device = host.to(dut.device)
    assert on_device.dtype == dtype and on_device.device == dut.device
    assert torch.equal(on_device.cpu(), host)


def test_unknown_device_index_is_rejected(dut):
    with pytest.raises(RuntimeError):
        torch.empty(1, device=torch.device(dut.name, dut.count))
