"""Per-device generators: seeding, state save/restore, explicit generators."""

import torch
from conftest import DEVICE_MODULE, DEVICE_TYPE


def test_manual_seed_reproduces(device):
    DEVICE_MODULE.manual_seed(123)
    a = torch.randn(100, device=device).cpu()
    DEVICE_MODULE.manual_seed(123)
    b = torch.randn(100, device=device).cpu()
    DEVICE_MODULE.manual_seed(124)
    c = torch.randn(100, device=device).cpu()
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_openreg_stream_is_independent_of_cpu_generator(device):
    DEVICE_MODULE.manual_seed(7)
    a = torch.rand(50, device=device).cpu()
    DEVICE_MODULE.manual_seed(7)
    torch.rand(1000)  # drawing from the CPU generator must not shift openreg's
    b = torch.rand(50, device=device).cpu()
    assert torch.equal(a, b)


def test_get_set_rng_state_roundtrip(device):
    DEVICE_MODULE.manual_seed(0)
    state = DEVICE_MODULE.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    a = torch.rand(20, device=device).cpu()
    DEVICE_MODULE.set_rng_state(state)
    b = torch.rand(20, device=device).cpu()
    assert torch.equal(a, b)


def test_state_all_and_seed_all(two_devices):
    DEVICE_MODULE.manual_seed_all(5)
    states = DEVICE_MODULE.get_rng_state_all()
    assert len(states) == DEVICE_MODULE.device_count()
    x0 = torch.rand(10, device=f"{DEVICE_TYPE}:0").cpu()
    x1 = torch.rand(10, device=f"{DEVICE_TYPE}:1").cpu()
    assert torch.equal(x0, x1)  # same seed, separate generators
    DEVICE_MODULE.set_rng_state_all(states)
    assert torch.equal(torch.rand(10, device=f"{DEVICE_TYPE}:1").cpu(), x1)
    DEVICE_MODULE.seed_all()
    assert DEVICE_MODULE.default_generators[0].initial_seed() == \
        DEVICE_MODULE.default_generators[1].initial_seed()


def test_initial_seed_and_seed(device):
    DEVICE_MODULE.manual_seed(42)
    assert DEVICE_MODULE.initial_seed() == 42
    DEVICE_MODULE.seed()
    new_seed = DEVICE_MODULE.initial_seed()
    assert isinstance(new_seed, int)
    DEVICE_MODULE.manual_seed(new_seed)
    a = torch.rand(5, device=device).cpu()
    DEVICE_MODULE.manual_seed(new_seed)
    assert torch.equal(torch.rand(5, device=device).cpu(), a)


def test_torch_manual_seed_seeds_openreg(device):
    torch.manual_seed(99)
    a = torch.randn(10, device=device).cpu()
    torch.manual_seed(99)
    b = torch.randn(10, device=device).cpu()
    assert torch.equal(a, b)
    assert DEVICE_MODULE.initial_seed() == 99


def test_explicit_generator(device):
    g = torch.Generator(device=device)
    assert g.device == device
    g.manual_seed(3)
    a = torch.randn(10, device=device, generator=g).cpu()
    g.manual_seed(3)
    b = torch.randn(10, device=device, generator=g).cpu()
    assert torch.equal(a, b)
    # Uses the same engine as CPU's mt19937 generator: same seed, same numbers.
    assert torch.equal(a, torch.randn(10, generator=torch.Generator().manual_seed(3)))


def test_default_generator_and_distribution_ops(device):
    DEVICE_MODULE.manual_seed(11)
    x = torch.empty(10000, device=device).uniform_(2.0, 3.0).cpu()
    assert 2.0 <= x.min() and x.max() < 3.0
    d = torch.nn.functional.dropout(torch.ones(10000, device=device), p=0.5).cpu()
    assert 0.4 < (d == 0).float().mean() < 0.6
    assert DEVICE_MODULE.default_generators[0].device == device


def test_generator_offset_selects_a_reproducible_substream(device):
    g = torch.Generator(device).manual_seed(7)
    assert g.get_offset() == 0
    base = torch.randn(8, device=device, generator=g).cpu()
    g.set_offset(64)
    assert g.get_offset() == 64 and g.initial_seed() == 7
    at_64 = torch.randn(8, device=device, generator=g).cpu()
    assert not torch.equal(base, at_64)
    g.set_offset(64)
    torch.testing.assert_close(torch.randn(8, device=device, generator=g).cpu(), at_64)
    g.set_offset(0)  # the seed's own stream again
    torch.testing.assert_close(torch.randn(8, device=device, generator=g).cpu(), base)
    g.manual_seed(7)  # seeding starts over at offset 0
    assert g.get_offset() == 0


def test_generator_offset_survives_clone_state(device):
    g = torch.Generator(device).manual_seed(3)
    g.set_offset(12)
    c = g.clone_state()
    assert c.get_offset() == 12 and c.initial_seed() == 3
    torch.testing.assert_close(torch.rand(4, device=device, generator=c).cpu(),
                               torch.rand(4, device=device, generator=g).cpu())
