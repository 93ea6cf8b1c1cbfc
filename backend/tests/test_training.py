"""A small MLP trained for a few steps on openreg follows the CPU run."""

from __future__ import annotations

import copy

import torch

from _ops_util import count_paths
from conftest import DEVICE_TYPE


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 32),
        torch.nn.GELU(),
        torch.nn.Linear(32, 4),
    )


def train(model: torch.nn.Module, device: str, steps: int = 8) -> list[float]:
    g = torch.Generator().manual_seed(1)
    data = torch.randn(64, 16, generator=g)
    target = torch.randint(0, 4, (64,), generator=g)
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for step in range(steps):
        batch = slice((step % 4) * 16, (step % 4 + 1) * 16)
        x, y = data[batch].to(device), target[batch].to(device)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_mlp_training_matches_cpu():
    cpu_model = make_model()
    dev_model = copy.deepcopy(cpu_model)
    cpu_losses = train(cpu_model, "cpu")
    with count_paths() as paths:
        dev_losses = train(dev_model, DEVICE_TYPE)
    torch.testing.assert_close(torch.tensor(dev_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-5)
    for p_dev, p_cpu in zip(dev_model.parameters(), cpu_model.parameters()):
        torch.testing.assert_close(p_dev.detach().cpu(), p_cpu.detach(), rtol=1e-4, atol=1e-5)
    assert cpu_losses[-1] < cpu_losses[0]
    # The bulk of the step runs in native kernels, not through the fallback.
    assert paths.native > paths.fallback
