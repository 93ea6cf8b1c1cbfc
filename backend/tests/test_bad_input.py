"""Bad input raises a clear Python error: no crash, no hang."""

import pytest
import torch
from conftest import DEVICE_MODULE, DEVICE_TYPE


def test_out_of_range_device_index_on_creation():
    with pytest.raises(RuntimeError, match="out of range"):
        torch.empty(2, device=f"{DEVICE_TYPE}:99")


def test_out_of_range_device_index_on_copy():
    with pytest.raises(RuntimeError, match="out of range"):
        torch.ones(2).to(f"{DEVICE_TYPE}:99")


def test_out_of_range_set_device():
    with pytest.raises(RuntimeError, match="out of range"):
        DEVICE_MODULE.set_device(42)
    assert DEVICE_MODULE.current_device() == 0


def test_out_of_range_stream_and_generator():
    with pytest.raises(RuntimeError, match="out of range"):
        DEVICE_MODULE.Stream(device=f"{DEVICE_TYPE}:42")
    with pytest.raises(IndexError):
        DEVICE_MODULE.default_generators[42]


def test_cross_device_op(two_devices):
    a = torch.ones(3, device=f"{DEVICE_TYPE}:0")
    b = torch.ones(3, device=f"{DEVICE_TYPE}:1")
    with pytest.raises(RuntimeError, match="same device"):
        a + b
    with pytest.raises(RuntimeError, match="same device"):
        torch.cat([a, b])


def test_device_and_cpu_mix_is_an_error(device):
    with pytest.raises(RuntimeError):
        torch.ones(3, device=device) + torch.ones(3)


@pytest.mark.parametrize("dtype", [torch.qint8, torch.quint8, torch.bits8], ids=str)
def test_unsupported_dtype(dtype, device):
    with pytest.raises((TypeError, RuntimeError), match=f"dtype|{DEVICE_TYPE}|not supported|not implemented"):
        torch.empty(4, dtype=dtype, device=device)


def test_unsupported_layout(device):
    with pytest.raises(RuntimeError):
        torch.empty(2, 2, device=device, layout=torch.sparse_coo)


def test_negative_size(device):
    with pytest.raises(RuntimeError):
        torch.empty(-1, device=device)


def test_bad_rng_state(device):
    with pytest.raises(RuntimeError):
        DEVICE_MODULE.set_rng_state(torch.zeros(3, dtype=torch.uint8))


def test_backend_still_works_after_errors(device):
    for _ in range(3):
        with pytest.raises((IndexError, RuntimeError)):
            torch.empty(1, device=f"{DEVICE_TYPE}:77")
    assert torch.ones(2, device=device).sum().item() == 2.0
