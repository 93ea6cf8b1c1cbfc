"""Custom ops (torch.library) with a kernel registered for the device."""

import pytest
import torch

pytestmark = pytest.mark.conformance("custom_ops", "optional")

_calls: list[str] = []


@pytest.fixture(scope="module")
def scale_op(dut):
    lib = torch.library.Library("ootci_conformance", "FRAGMENT")  # noqa: TOR901
    lib.define("scale(Tensor x, float k) -> Tensor")

    def device_kernel(x, k):
        _calls.append(dut.name)
        return (x.cpu() * k).to(x.device)

    lib.impl("scale", device_kernel, "PrivateUse1")
    lib.impl("scale", lambda x, k: x * k, "CPU")
    lib.impl("scale", lambda x, k: torch.empty_like(x), "Meta")
    yield torch.ops.ootci_conformance.scale
    lib._destroy()


def test_device_kernel_is_dispatched_to(dut, scale_op):
    _calls.clear()
    y = scale_op(torch.arange(4.0).to(dut.device), 2.0)
    assert _calls == [dut.name]
    assert y.device == dut.device
    assert torch.equal(y.cpu(), torch.arange(4.0) * 2)


def test_meta_kernel_infers_shape(dut, scale_op):
    y = scale_op(torch.empty(3, 5, device="meta"), 2.0)
    assert y.shape == (3, 5)


def test_register_kernel_by_device_name(dut):
    @torch.library.custom_op("ootci_conformance::twice", mutates_args=())
    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    seen = []

    @twice.register_kernel(dut.name)
    def _(x):
        seen.append(x.device.type)
        return (x.cpu() * 2).to(x.device)

    y = twice(torch.ones(2).to(dut.device))
    assert seen == [dut.name]
    assert torch.equal(y.cpu(), torch.full((2,), 2.0))
