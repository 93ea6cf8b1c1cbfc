"""The minimal set of ops a device needs for real models: results match the CPU's."""

import pytest
import torch

pytestmark = pytest.mark.conformance("ops", "required")

CASES = {
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "sub_scalar": lambda a, b: a - 1.5,
    "div": lambda a, b: a / (b.abs() + 1),
    "sum": lambda a, b: a.sum(),
    "mean_dim": lambda a, b: a.mean(dim=1),
    "matmul": lambda a, b: a @ b.t(),
    "relu": lambda a, b: torch.relu(a),
    "view_reshape": lambda a, b: a.view(-1).reshape(4, 4),
    "transpose_contiguous": lambda a, b: a.t().contiguous(),
    "index": lambda a, b: a[1:3, ::2],
    "cat": lambda a, b: torch.cat([a, b]),
    "compare": lambda a, b: a > b,
    "where": lambda a, b: torch.where(a > 0, a, b),
    "softmax": lambda a, b: torch.softmax(a, dim=-1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_cpu(dut, name):
    torch.manual_seed(0)
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    expected = CASES[name](a, b)
    got = CASES[name](a.to(dut.device), b.to(dut.device))
    assert got.device.type == dut.name
    torch.testing.assert_close(got.cpu(), expected)


def test_fill_and_zero_in_place(dut):
    t = torch.empty(5, device=dut.device)
    t.fill_(3.0)
    assert torch.equal(t.cpu(), torch.full((5,), 3.0))
    t.zero_()
    assert torch.equal(t.cpu(), torch.zeros(5))


def test_item_reads_a_scalar(dut):
    assert torch.tensor([2.5]).to(dut.device).item() == 2.5
