"""torch.save / torch.load and pickling of device tensors."""

import io
import pickle

import pytest
import torch

pytestmark = pytest.mark.conformance("serialization", "required")


def _roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


def test_save_load_keeps_device_and_values(dut):
    t = torch.arange(6.0).to(dut.device)
    back = _roundtrip(t)
    assert back.device == dut.device
    assert torch.equal(back.cpu(), torch.arange(6.0))


def test_map_location_cpu(dut):
    back = _roundtrip(torch.arange(3.0).to(dut.device), map_location="cpu")
    assert back.device.type == "cpu"
    assert torch.equal(back, torch.arange(3.0))


def test_state_dict_roundtrip(dut):
    m = torch.nn.Linear(3, 2).to(dut.device)
    state = _roundtrip(m.state_dict())
    assert state["weight"].device == dut.device
    torch.testing.assert_close(state["weight"].cpu(), m.weight.detach().cpu())


def test_pickle_roundtrip(dut):
    t = torch.arange(4.0).to(dut.device)
    back = pickle.loads(pickle.dumps(t))
    assert back.device == dut.device
    assert torch.equal(back.cpu(), torch.arange(4.0))
