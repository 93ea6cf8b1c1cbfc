"""Ops without a native kernel still run (a CPU fallback registered for the device)."""

import pytest
import torch

pytestmark = pytest.mark.conformance("fallback", "recommended")


def test_op_without_native_kernel_matches_cpu(dut):
    x = torch.randn(8, 3)
    got = torch.logcumsumexp(x.to(dut.device), 0)
    assert got.device.type == dut.name
    torch.testing.assert_close(got.cpu(), torch.logcumsumexp(x, 0))


def test_in_place_op_through_fallback_mutates_the_device_tensor(dut):
    x = torch.randn(6)
    d = x.to(dut.device)
    d.atan_()
    torch.testing.assert_close(d.cpu(), x.atan())


def test_complex_dtype_works_through_the_fallback(dut):
    z = torch.tensor([1 + 2j, 3 - 1j])
    torch.testing.assert_close((z.to(dut.device) * 2).cpu(), z * 2)
