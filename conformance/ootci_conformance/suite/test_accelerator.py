"""The device through the generic torch.accelerator API."""

import pytest
import torch

pytestmark = pytest.mark.conformance("accelerator", "required")


def test_current_accelerator_is_the_device(dut):
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator().type == dut.name


def test_device_count_agrees_with_the_module(dut):
    assert torch.accelerator.device_count() == dut.count


def test_synchronize(dut):
    torch.ones(16, device=dut.device).mul_(2)
    torch.accelerator.synchronize()
    torch.accelerator.synchronize(0)


def test_current_stream_is_on_the_device(dut):
    assert torch.accelerator.current_stream().device.type == dut.name


def test_out_of_range_index_is_an_error(dut):
    with pytest.raises((RuntimeError, ValueError, AssertionError)):
        torch.accelerator.set_device_index(dut.count + 7)
