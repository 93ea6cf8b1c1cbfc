"""Autocast for the device type."""

import pytest
import torch

pytestmark = pytest.mark.conformance("autocast", "optional")


def test_autocast_is_available_for_the_device(dut):
    assert torch.amp.is_autocast_available(dut.name)


def test_matmul_runs_in_the_autocast_dtype(dut):
    a = torch.randn(4, 4).to(dut.device)
    dtype = torch.get_autocast_dtype(dut.name)
    with torch.autocast(device_type=dut.name):
        y = a @ a
    assert y.dtype == dtype != torch.float32


def test_autocast_disabled_keeps_float32(dut):
    a = torch.randn(4, 4).to(dut.device)
    with torch.autocast(device_type=dut.name, enabled=False):
        assert (a @ a).dtype == torch.float32
