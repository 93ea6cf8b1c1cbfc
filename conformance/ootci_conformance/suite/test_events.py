"""Events through torch.Event: record, query, synchronize, wait, elapsed time."""

import pytest
import torch

pytestmark = pytest.mark.conformance("events", "recommended")


def test_unrecorded_event_is_complete(dut):
    assert torch.Event(device=dut.name).query()


def test_record_then_synchronize_completes(dut):
    e = torch.Event(device=dut.name)
    torch.ones(64, device=dut.device).mul_(3)
    e.record()
    e.synchronize()
    assert e.query()


def test_elapsed_time_with_timing(dut):
    start = torch.Event(device=dut.name, enable_timing=True)
    end = torch.Event(device=dut.name, enable_timing=True)
    start.record()
    torch.ones(1024, device=dut.device).mul_(2)
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0


def test_stream_record_event_is_on_the_device(dut):
    ev = torch.Stream(device=dut.name).record_event()
    ev.synchronize()
    assert ev.query()
    assert ev.device.type == dut.name


def test_event_wait_orders_streams(dut):
    producer, consumer = torch.Stream(device=dut.name), torch.Stream(device=dut.name)
    x = torch.zeros(100, device=dut.device)
    torch.accelerator.synchronize()
    with producer:
        x.add_(5)
        done = torch.Event(device=dut.name)
        done.record()
    done.wait(consumer)
    with consumer:
        y = x + 1
    consumer.synchronize()
    assert torch.equal(y.cpu(), torch.full((100,), 6.0))
