"""torch.accelerator end to end with openreg as the accelerator."""

import pytest
import torch
from conftest import DEVICE_MODULE, DEVICE_TYPE


def test_current_accelerator_is_openreg():
    assert torch.accelerator.is_available()
    acc = torch.accelerator.current_accelerator()
    assert acc is not None and acc.type == DEVICE_TYPE
    assert torch.accelerator.device_count() == DEVICE_MODULE.device_count()


def test_set_device_index(two_devices):
    torch.accelerator.set_device_index(1)
    assert torch.accelerator.current_device_index() == 1
    assert DEVICE_MODULE.current_device() == 1
    torch.accelerator.set_device_index(0)
    assert DEVICE_MODULE.current_device() == 0


@pytest.mark.skipif(not hasattr(torch.accelerator, "device_index"), reason="torch.accelerator.device_index absent")
def test_device_index_context(two_devices):
    with torch.accelerator.device_index(1):
        assert DEVICE_MODULE.current_device() == 1
    assert DEVICE_MODULE.current_device() == 0


def test_streams_through_accelerator(device):
    s = torch.Stream(device=DEVICE_TYPE)
    torch.accelerator.set_stream(s)
    assert torch.accelerator.current_stream() == s
    assert DEVICE_MODULE.current_stream() == s
    torch.accelerator.set_stream(DEVICE_MODULE.default_stream())
    torch.accelerator.synchronize()


def test_accelerator_memory_apis(device):
    if not hasattr(torch.accelerator, "memory_allocated"):
        pytest.skip("torch.accelerator memory APIs absent in this release")
    base = torch.accelerator.memory_allocated()
    t = torch.empty(1 << 20, dtype=torch.uint8, device=device)
    assert torch.accelerator.memory_allocated() == base + (1 << 20)
    assert torch.accelerator.memory_allocated() == DEVICE_MODULE.memory_allocated()
    assert torch.accelerator.memory_reserved() == DEVICE_MODULE.memory_reserved()
    stats = torch.accelerator.memory_stats()
    assert stats["allocated_bytes.all.current"] == DEVICE_MODULE.memory_allocated()
    torch.accelerator.reset_peak_memory_stats()
    assert torch.accelerator.max_memory_allocated() == torch.accelerator.memory_allocated()
    del t
    torch.accelerator.empty_cache()
    assert DEVICE_MODULE.memory_reserved() == DEVICE_MODULE.memory_allocated()


def test_pin_memory_targets_the_accelerator(device):
    p = torch.empty(16, pin_memory=True)
    assert p.is_pinned()
    x = p.fill_(3.0).to(device, non_blocking=True)
    torch.accelerator.synchronize()
    assert torch.equal(x.cpu(), torch.full((16,), 3.0))


def test_generic_events_with_timing(device):
    a = torch.Event(device=DEVICE_TYPE, enable_timing=True)
    b = torch.Event(device=DEVICE_TYPE, enable_timing=True)
    a.record()
    torch.ones(1000, device=device).sum()
    b.record()
    b.synchronize()
    assert a.elapsed_time(b) >= 0


def test_device_capability_lists_every_dtype_the_device_allocates():
    from torch_openreg import _compat

    if not _compat.HAS_DEVICE_CAPABILITY:
        pytest.skip("torch.accelerator.get_device_capability needs torch >= 2.10")
    for index in range(DEVICE_MODULE.device_count()):
        dtypes = torch.accelerator.get_device_capability(f"{DEVICE_TYPE}:{index}")["supported_dtypes"]
        assert {torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.bool,
                torch.complex64, torch.qint8, torch.quint8} <= set(dtypes)
        for dtype in (torch.float16, torch.bfloat16, torch.complex64, torch.uint8):
            t = torch.ones(3, dtype=torch.float32).to(f"{DEVICE_TYPE}:{index}").to(dtype)
            assert t.dtype == dtype and torch.equal(t.cpu(), torch.ones(3, dtype=dtype))
    with pytest.raises(RuntimeError, match="device index is out of range"):
        torch.accelerator.get_device_capability(f"{DEVICE_TYPE}:{DEVICE_MODULE.device_count()}")


def test_out_of_range_index_is_a_runtime_error_as_on_cuda():
    count = torch.accelerator.device_count()
    with pytest.raises(RuntimeError, match="The device index is out of range"):
        torch.accelerator.set_device_index(count)
    with pytest.raises(RuntimeError, match="The device index is out of range"):
        torch.empty(1, device=f"{DEVICE_TYPE}:{count}")
    assert torch.accelerator.current_device_index() == 0


def test_public_init_and_is_initialized(python):
    r = python("""
        import torch, torch_openreg
        before = torch.openreg.is_initialized()
        torch.openreg.init()
        torch.openreg.init()   # idempotent
        print(before, torch.openreg.is_initialized())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "True"]


def test_init_in_a_forked_child_names_openreg(python):
    r = python("""
        import multiprocessing, torch, torch_openreg
        torch.openreg.init()

        def child(q):
            try:
                torch.openreg.init()
                q.put("no error")
            except RuntimeError as e:
                q.put(str(e))

        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,))
        p.start(); p.join()
        print(q.get())
    """)
    assert r.returncode == 0, r.stderr
    assert ("Cannot re-initialize OpenReg in forked subprocess. To use OpenReg with "
            "multiprocessing, you must use the 'spawn' start method") in r.stdout
