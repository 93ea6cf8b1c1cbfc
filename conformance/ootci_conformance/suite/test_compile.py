"""torch.compile on device tensors."""

import pytest
import torch

pytestmark = pytest.mark.conformance("compile", "optional")


def _mlp(x, w1, w2):
    return torch.relu(x @ w1) @ w2


def _inputs(device):
    torch.manual_seed(0)
    return [torch.randn(8, 16), torch.randn(16, 32), torch.randn(32, 4)], device


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_mlp_matches_eager_cpu(dut, backend):
    torch._dynamo.reset()
    args, _ = _inputs(dut.device)
    expected = _mlp(*args)
    compiled = torch.compile(_mlp, backend=backend, fullgraph=True)
    got = compiled(*(a.to(dut.device) for a in args))
    assert got.device == dut.device
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-4, atol=1e-4)


def test_compiled_backward_matches_cpu(dut):
    torch._dynamo.reset()
    (x, w1, w2), _ = _inputs(dut.device)
    wc = w1.clone().requires_grad_()
    _mlp(x, wc, w2).sum().backward()
    wd = w1.to(dut.device).requires_grad_()
    torch.compile(_mlp, backend="aot_eager")(x.to(dut.device), wd, w2.to(dut.device)).sum().backward()
    torch.testing.assert_close(wd.grad.cpu(), wc.grad, rtol=1e-4, atol=1e-4)
