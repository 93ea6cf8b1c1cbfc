"""Autograd on device tensors: gradients match the CPU's and stay on the device."""

import pytest
import torch

pytestmark = pytest.mark.conformance("autograd", "required")


def _loss(x, w):
    return torch.relu(x @ w).sum()


def test_gradients_match_cpu(dut):
    torch.manual_seed(0)
    x, w = torch.randn(4, 3), torch.randn(3, 2)
    wc = w.clone().requires_grad_()
    _loss(x, wc).backward()
    wd = w.to(dut.device).requires_grad_()
    _loss(x.to(dut.device), wd).backward()
    assert wd.grad.device == dut.device
    torch.testing.assert_close(wd.grad.cpu(), wc.grad)


def test_gradient_accumulates_across_backward_calls(dut):
    w = torch.ones(3, device=dut.device, requires_grad=True)
    for _ in range(2):
        (w * 2).sum().backward()
    assert torch.equal(w.grad.cpu(), torch.full((3,), 4.0))


def test_training_step_lowers_the_loss(dut):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1).to(dut.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 4).to(dut.device), torch.randn(16, 1).to(dut.device)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
