"""Streams through torch.Stream and torch.accelerator."""

import pytest
import torch

pytestmark = pytest.mark.conformance("streams", "recommended")


def test_current_stream_is_on_the_current_device(dut):
    current = torch.accelerator.current_stream()
    assert current.device == dut.device
    assert torch.accelerator.current_stream(0) == current


def test_new_streams_are_distinct_from_the_default(dut):
    a, b = torch.Stream(device=dut.name), torch.Stream(device=dut.name)
    default = torch.accelerator.current_stream()
    assert a != default and b != default


def test_stream_context_sets_and_restores(dut):
    before = torch.accelerator.current_stream()
    s = torch.Stream(device=dut.name)
    with s:
        assert torch.accelerator.current_stream() == s
    assert torch.accelerator.current_stream() == before


def test_query_after_synchronize(dut):
    s = torch.Stream(device=dut.name)
    with s:
        torch.ones(64, device=dut.device).mul_(2)
    s.synchronize()
    assert s.query()


def test_wait_stream_orders_work(dut):
    producer, consumer = torch.Stream(device=dut.name), torch.Stream(device=dut.name)
    x = torch.zeros(1000, device=dut.device)
    torch.accelerator.synchronize()
    with producer:
        x.fill_(1.0)
    consumer.wait_stream(producer)
    with consumer:
        y = x * 2
    consumer.synchronize()
    assert torch.equal(y.cpu(), torch.full((1000,), 2.0))
