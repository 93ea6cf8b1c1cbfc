"""Events: record, query, synchronize, wait, elapsed time."""

import pytest
import torch

import torch_openreg._C as _C
from conftest import DEVICE_MODULE, DEVICE_TYPE


def test_unrecorded_event_is_complete():
    assert DEVICE_MODULE.Event().query()


def test_record_query_synchronize(device):
    e = DEVICE_MODULE.Event()
    _C._sleep(200)
    e.record()
    assert not e.query()
    e.synchronize()
    assert e.query()


def test_elapsed_time_measures_stream_time(device):
    start = DEVICE_MODULE.Event(enable_timing=True)
    end = DEVICE_MODULE.Event(enable_timing=True)
    start.record()
    _C._sleep(100)
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert 90 <= ms < 5000


def test_elapsed_time_needs_timing(device):
    start, end = DEVICE_MODULE.Event(), DEVICE_MODULE.Event()
    start.record()
    end.record()
    end.synchronize()
    # torch.Event rejects it before the guard is asked (ValueError); the guard
    # would raise RuntimeError from the runtime's orErrorInvalidResourceHandle.
    with pytest.raises((ValueError, RuntimeError), match="timing"):
        start.elapsed_time(end)


def test_event_wait_orders_streams(device):
    producer, consumer = DEVICE_MODULE.Stream(), DEVICE_MODULE.Stream()
    x = torch.zeros(100, device=device)
    DEVICE_MODULE.synchronize()
    with DEVICE_MODULE.stream(producer):
        _C._sleep(150)
        x.add_(5)
        done = DEVICE_MODULE.Event()
        done.record()
    done.wait(consumer)
    with DEVICE_MODULE.stream(consumer):
        y = x + 1
    consumer.synchronize()
    assert torch.equal(y.cpu(), torch.full((100,), 6.0))


def test_stream_record_event_api(device):
    s = DEVICE_MODULE.Stream()
    ev = s.record_event()
    ev.synchronize()
    assert ev.query()
    assert ev.device.type == DEVICE_TYPE
