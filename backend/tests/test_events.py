"""Events: record, query, synchronize, wait, elapsed time."""

import pytest
import torch

import torch_openreg._C as _C


def test_unrecorded_event_is_complete():
    assert torch.openreg.Event().query()


def test_record_query_synchronize(device):
    e = torch.openreg.Event()
    _C._sleep(200)
    e.record()
    assert not e.query()
    e.synchronize()
    assert e.query()


def test_elapsed_time_measures_stream_time(device):
    start = torch.openreg.Event(enable_timing=True)
    end = torch.openreg.Event(enable_timing=True)
    start.record()
    _C._sleep(100)
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert 90 <= ms < 5000


def test_elapsed_time_needs_timing(device):
    start, end = torch.openreg.Event(), torch.openreg.Event()
    start.record()
    end.record()
    end.synchronize()
    # torch.Event rejects it before the guard is asked (ValueError); the guard
    # would raise RuntimeError from the runtime's orErrorInvalidResourceHandle.
    with pytest.raises((ValueError, RuntimeError), match="timing"):
        start.elapsed_time(end)


def test_event_wait_orders_streams(device):
    producer, consumer = torch.openreg.Stream(), torch.openreg.Stream()
    x = torch.zeros(100, device=device)
    torch.openreg.synchronize()
    with torch.openreg.stream(producer):
        _C._sleep(150)
        x.add_(5)
        done = torch.openreg.Event()
        done.record()
    done.wait(consumer)
    with torch.openreg.stream(consumer):
        y = x + 1
    consumer.synchronize()
    assert torch.equal(y.cpu(), torch.full((100,), 6.0))


def test_stream_record_event_api(device):
    s = torch.openreg.Stream()
    ev = s.record_event()
    ev.synchronize()
    assert ev.query()
    assert ev.device.type == "openreg"
