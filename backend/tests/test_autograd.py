"""Autograd through the native kernels: gradients equal CPU's, and the
backward kernels (threshold_backward, gelu_backward, softmax backward) run
natively."""

from __future__ import annotations

import pytest
import torch

from _ops_util import count_paths
from conftest import DEVICE_TYPE


def grads(fn, *inputs, device):
    leaves = [t.detach().to(device).requires_grad_() for t in inputs]
    out = fn(*leaves)
    out.backward(torch.ones_like(out))
    return out.detach().cpu(), [t.grad.cpu() for t in leaves]


CASES = {
    "arith": lambda a, b: (a * b + a / (b.abs() + 1) - b.pow(2)).sum(dim=0),
    "broadcast": lambda a, b: a + b[0],
    "relu": lambda a, b: torch.relu(a) * b,
    "gelu": lambda a, b: torch.nn.functional.gelu(a) + b,
    "gelu_tanh": lambda a, b: torch.nn.functional.gelu(a, approximate="tanh") * b,
    "exp_log": lambda a, b: torch.log(torch.exp(a) + b.abs()),
    "softmax": lambda a, b: torch.softmax(a, dim=1) * b,
    "log_softmax": lambda a, b: torch.log_softmax(a @ b.t(), dim=0),
    "mean_max": lambda a, b: a.mean(dim=1) + b.amax(dim=1),
    "where": lambda a, b: torch.where(a > 0, a, b * 2),
    "index": lambda a, b: a[torch.tensor([0, 2, 2])] * b[1],
    "addmm": lambda a, b: torch.addmm(b[0, :4], a, b.t()),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_match_cpu(name):
    g = torch.Generator().manual_seed(1)
    a = torch.randn(4, 6, generator=g, dtype=torch.float64)
    b = torch.randn(4, 6, generator=g, dtype=torch.float64)
    cpu_out, cpu_grads = grads(CASES[name], a, b, device="cpu")
    dev_out, dev_grads = grads(CASES[name], a, b, device=DEVICE_TYPE)
    torch.testing.assert_close(dev_out, cpu_out)
    for dev, cpu in zip(dev_grads, cpu_grads):
        torch.testing.assert_close(dev, cpu)


@pytest.mark.parametrize(
    "fn",
    [torch.relu, torch.nn.functional.gelu, lambda x: torch.softmax(x, 0), lambda x: torch.log_softmax(x, 1)],
)
def test_backward_kernels_are_native(fn):
    x = torch.randn(5, 7, device=DEVICE_TYPE, requires_grad=True)
    out = fn(x)
    grad = torch.randn(5, 7, device=DEVICE_TYPE)
    with count_paths() as paths:
        out.backward(grad)
    assert paths.fallback == 0 and paths.native >= 1


def test_gradcheck_on_device():
    x = torch.randn(3, 4, dtype=torch.float64, device=DEVICE_TYPE, requires_grad=True)
    w = torch.randn(4, 2, dtype=torch.float64, device=DEVICE_TYPE, requires_grad=True)

    def fn(x, w):
        return torch.log_softmax(torch.nn.functional.gelu(x @ w), dim=1)

    assert torch.autograd.gradcheck(fn, (x, w))


def test_gradient_accumulation_across_backward_calls():
    x = torch.randn(3, device=DEVICE_TYPE, requires_grad=True)
    (x * 2).sum().backward()
    (x * 3).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), torch.full((3,), 5.0))
