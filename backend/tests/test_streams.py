"""Streams: current/default/pool streams, priorities, ordering, context."""

import time

import torch

import torch_openreg._C as _C
from conftest import DEVICE_MODULE, DEVICE_TYPE


def test_default_stream_is_current_initially(device):
    cur = DEVICE_MODULE.current_stream()
    default = DEVICE_MODULE.default_stream()
    assert cur == default
    assert default.stream_id == 0
    assert default.device == device


def test_new_streams_come_from_pool_and_are_distinct(device):
    a, b = DEVICE_MODULE.Stream(), DEVICE_MODULE.Stream()
    assert a.device_type == b.device_type
    assert a.stream_id != 0 and b.stream_id != 0
    assert a != b


def test_priorities_map_to_runtime_levels(device):
    least, greatest = _C._stream_priority_range()
    low = DEVICE_MODULE.Stream(priority=0)
    high = DEVICE_MODULE.Stream(priority=greatest)
    assert low.priority == least
    assert high.priority == greatest
    # Out-of-range priorities are clamped like CUDA's.
    assert DEVICE_MODULE.Stream(priority=greatest - 10).priority == greatest


def test_stream_context_sets_and_restores(device):
    s = DEVICE_MODULE.Stream()
    with DEVICE_MODULE.stream(s):
        assert DEVICE_MODULE.current_stream() == s
        assert torch.accelerator.current_stream() == s
    assert DEVICE_MODULE.current_stream() == DEVICE_MODULE.default_stream()


def test_torch_stream_context_manager(device):
    s = torch.Stream(device=DEVICE_TYPE)
    with s:
        assert DEVICE_MODULE.current_stream().stream_id == s.stream_id
    assert DEVICE_MODULE.current_stream().stream_id == 0


def test_query_and_synchronize(device):
    s = DEVICE_MODULE.Stream()
    with DEVICE_MODULE.stream(s):
        _C._sleep(200)
    assert not s.query()
    start = time.monotonic()
    s.synchronize()
    assert s.query()
    assert time.monotonic() - start > 0.05


def test_wait_stream_orders_work_across_streams(device):
    producer, consumer = DEVICE_MODULE.Stream(), DEVICE_MODULE.Stream()
    x = torch.zeros(1000, device=device)
    DEVICE_MODULE.synchronize()
    with DEVICE_MODULE.stream(producer):
        _C._sleep(200)          # the write below happens only after the sleep
        x.fill_(1.0)
    consumer.wait_stream(producer)
    with DEVICE_MODULE.stream(consumer):
        y = x * 2
    consumer.synchronize()
    assert torch.equal(y.cpu(), torch.full((1000,), 2.0))


def test_streams_per_device(two_devices):
    s1 = DEVICE_MODULE.Stream(device=f"{DEVICE_TYPE}:1")
    assert s1.device_index == 1
    assert DEVICE_MODULE.current_stream(1).stream_id == 0
    with DEVICE_MODULE.stream(s1):
        assert DEVICE_MODULE.current_device() == 1
        assert DEVICE_MODULE.current_stream(1) == s1
        assert DEVICE_MODULE.current_stream(0).stream_id == 0
    assert DEVICE_MODULE.current_device() == 0


def test_current_stream_is_thread_local(device):
    import threading

    s = DEVICE_MODULE.Stream()
    seen = []
    with DEVICE_MODULE.stream(s):
        t = threading.Thread(target=lambda: seen.append(DEVICE_MODULE.current_stream().stream_id))
        t.start()
        t.join()
    assert seen == [0]


def test_native_handle_is_the_runtime_stream(device):
    from torch_openreg import _compat

    if not _compat.HAS_STREAM_NATIVE_HANDLE:
        import pytest

        pytest.skip("torch.Stream.native_handle needs torch >= 2.11")
    a, b = DEVICE_MODULE.Stream(), DEVICE_MODULE.Stream()
    assert a.native_handle != 0 and b.native_handle != 0
    assert a.native_handle != b.native_handle
    same = DEVICE_MODULE.Stream(stream_id=a.stream_id, device_index=a.device_index,
                                device_type=a.device_type)
    assert same.native_handle == a.native_handle
