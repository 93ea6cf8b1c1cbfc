"""Recurrent layers on openreg: the fused LSTM/GRU cells, forward and backward, follow CPU.

nn.LSTM and nn.GRU reach the device through `_thnn_fused_lstm_cell` /
`_thnn_fused_gru_cell` (as on CUDA); nn.RNN through plain ops. Gradients are
compared for the input, the initial state and every parameter.
"""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import DEVICE_TYPE


def _run(module: torch.nn.Module, x: torch.Tensor, state, device: str):
    module = copy.deepcopy(module).to(device)
    x = x.detach().to(device).requires_grad_()
    if isinstance(state, tuple):
        state = tuple(s.detach().to(device).requires_grad_() for s in state)
        leaves = [x, *state]
    else:
        state = state.detach().to(device).requires_grad_()
        leaves = [x, state]
    out, last = module(x, state)
    lasts = last if isinstance(last, tuple) else (last,)
    loss = out.pow(2).sum() + sum(s.sin().sum() for s in lasts)
    loss.backward()
    grads = [leaf.grad for leaf in leaves] + [p.grad for p in module.parameters()]
    return [t.detach().cpu() for t in (out, *lasts, *grads)]


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("layers,bidirectional", [(1, False), (2, True)])
def test_recurrent_layer_matches_cpu(kind, bias, layers, bidirectional):
    torch.manual_seed(0)
    module = getattr(torch.nn, kind)(5, 7, num_layers=layers, bias=bias,
                                     bidirectional=bidirectional, batch_first=True)
    x = torch.randn(3, 4, 5)
    h = torch.randn(layers * (2 if bidirectional else 1), 3, 7)
    state = (h, torch.randn_like(h)) if kind == "LSTM" else h
    for got, want in zip(_run(module, x, state, DEVICE_TYPE), _run(module, x, state, "cpu"), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_lstm_with_projection_matches_cpu():
    torch.manual_seed(0)
    module = torch.nn.LSTM(4, 6, proj_size=3)
    x = torch.randn(5, 2, 4)
    state = (torch.randn(1, 2, 3), torch.randn(1, 2, 6))
    for got, want in zip(_run(module, x, state, DEVICE_TYPE), _run(module, x, state, "cpu"), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cell", ["LSTMCell", "GRUCell"])
def test_cells_match_cpu_and_use_the_fused_op(cell):
    torch.manual_seed(0)
    module = getattr(torch.nn, cell)(3, 4)
    x = torch.randn(2, 3)
    fused = "_thnn_fused_lstm_cell" if cell == "LSTMCell" else "_thnn_fused_gru_cell"
    with torch.profiler.profile() as prof:
        got = copy.deepcopy(module).to(DEVICE_TYPE)(x.to(DEVICE_TYPE))
    assert fused in {e.name.removeprefix("aten::") for e in prof.events()}
    want = module(x)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,),
                    strict=True):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-6)


def test_lstm_gradient_of_cell_state_alone():
    """Only cy reaches the loss: the fused backward gets no grad_hy."""
    torch.manual_seed(0)
    cell = torch.nn.LSTMCell(3, 4)
    x = torch.randn(2, 3)
    results = []
    for device in (DEVICE_TYPE, "cpu"):
        c = copy.deepcopy(cell).to(device)
        xd = x.to(device).requires_grad_()
        _, cy = c(xd)
        cy.sum().backward()
        results.append([xd.grad.cpu(), *(p.grad.cpu() for p in c.parameters())])
    for got, want in zip(*results, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_fused_lstm_cell_checks_state_shape():
    gates = torch.randn(2, 8, device=DEVICE_TYPE)
    with pytest.raises(RuntimeError, match="expected the state of size"):
        torch.ops.aten._thnn_fused_lstm_cell(gates, gates, torch.randn(2, 3, device=DEVICE_TYPE))


def test_gru_double_backward_follows_cpu():
    """Under create_graph autograd uses the differentiable composite, not the fused backward."""
    torch.manual_seed(0)
    cell = torch.nn.GRUCell(3, 4)
    x = torch.randn(2, 3)
    results = []
    for device in (DEVICE_TYPE, "cpu"):
        c = copy.deepcopy(cell).to(device)
        xd = x.to(device).requires_grad_()
        (g,) = torch.autograd.grad(c(xd).sum(), xd, create_graph=True)
        (gg,) = torch.autograd.grad(g.pow(2).sum(), xd)
        results.append(gg.cpu())
    torch.testing.assert_close(results[0], results[1], rtol=1e-4, atol=1e-5)
