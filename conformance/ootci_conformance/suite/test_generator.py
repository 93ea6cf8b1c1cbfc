"""The device's random number generator: seeding, state, explicit generators."""

import pytest
import torch

pytestmark = pytest.mark.conformance("generator", "recommended")


def test_manual_seed_reproduces(dut):
    torch.manual_seed(1234)
    a = torch.randn(64, device=dut.device).cpu()
    torch.manual_seed(1234)
    b = torch.randn(64, device=dut.device).cpu()
    assert torch.equal(a, b)


def test_get_set_rng_state_roundtrip(dut):
    state = dut.module.get_rng_state()
    a = torch.rand(16, device=dut.device).cpu()
    dut.module.set_rng_state(state)
    assert torch.equal(a, torch.rand(16, device=dut.device).cpu())


def test_explicit_generator_is_reproducible(dut):
    g = torch.Generator(device=dut.name)
    g.manual_seed(7)
    a = torch.rand(16, device=dut.device, generator=g).cpu()
    g.manual_seed(7)
    assert torch.equal(a, torch.rand(16, device=dut.device, generator=g).cpu())


def test_initial_seed_follows_manual_seed(dut):
    dut.module.manual_seed(42)
    assert dut.module.initial_seed() == 42
