"""The caching device allocator and its statistics."""

import pytest
import torch

import torch_openreg._C as _C
from conftest import DEVICE_MODULE, DEVICE_TYPE

MiB = 1 << 20


def _stats():
    return DEVICE_MODULE.memory_stats(0)


def test_allocation_is_counted_and_released(device):
    DEVICE_MODULE.synchronize()
    before = DEVICE_MODULE.memory_allocated(0)
    t = torch.empty(1000, dtype=torch.float32, device=device)  # 4000 B -> 4096 B block
    assert DEVICE_MODULE.memory_allocated(0) - before == 4096
    del t
    assert DEVICE_MODULE.memory_allocated(0) == before


def test_freed_block_is_cached_and_reused(device):
    DEVICE_MODULE.empty_cache()
    t = torch.empty(MiB, dtype=torch.uint8, device=device)
    ptr = t.data_ptr()
    device_allocs = _stats()["num_device_alloc"]
    reserved = DEVICE_MODULE.memory_reserved(0)
    del t
    # Freed, not returned: still reserved.
    assert DEVICE_MODULE.memory_reserved(0) == reserved
    t2 = torch.empty(MiB, dtype=torch.uint8, device=device)
    assert t2.data_ptr() == ptr
    assert _stats()["num_device_alloc"] == device_allocs


def test_empty_cache_returns_memory_to_runtime(device):
    t = torch.empty(4 * MiB, dtype=torch.uint8, device=device)
    del t
    assert DEVICE_MODULE.memory_reserved(0) >= 4 * MiB
    frees = _stats()["num_device_free"]
    DEVICE_MODULE.empty_cache()
    assert DEVICE_MODULE.memory_reserved(0) == DEVICE_MODULE.memory_allocated(0)
    assert _stats()["num_device_free"] > frees


def test_peak_and_reset_peak(device):
    DEVICE_MODULE.reset_peak_memory_stats(0)
    base = DEVICE_MODULE.memory_allocated(0)
    big = torch.empty(8 * MiB, dtype=torch.uint8, device=device)
    del big
    assert DEVICE_MODULE.max_memory_allocated(0) >= base + 8 * MiB
    DEVICE_MODULE.reset_peak_memory_stats(0)
    assert DEVICE_MODULE.max_memory_allocated(0) == DEVICE_MODULE.memory_allocated(0)


def test_stats_keys_and_pools(device):
    stats = _stats()
    for key in ("allocated_bytes.all.current", "reserved_bytes.all.peak",
                "allocation.small_pool.allocated", "segment.large_pool.freed",
                "num_alloc_retries", "num_ooms"):
        assert key in stats
    before_small = stats["allocation.small_pool.allocated"]
    before_large = stats["allocation.large_pool.allocated"]
    a = torch.empty(100, device=device)
    b = torch.empty(2 * MiB, dtype=torch.uint8, device=device)
    stats = _stats()
    assert stats["allocation.small_pool.allocated"] == before_small + 1
    assert stats["allocation.large_pool.allocated"] == before_large + 1
    del a, b


def test_stats_are_per_device(two_devices):
    before = DEVICE_MODULE.memory_allocated(1)
    t = torch.empty(MiB, dtype=torch.uint8, device=f"{DEVICE_TYPE}:1")
    assert DEVICE_MODULE.memory_allocated(1) == before + MiB
    assert t.device.index == 1
    del t


def test_mem_get_info_sees_runtime_arena(device):
    DEVICE_MODULE.empty_cache()
    free0, total = DEVICE_MODULE.mem_get_info(0)
    assert 0 < free0 <= total
    t = torch.empty(16 * MiB, dtype=torch.uint8, device=device)
    free1, _ = DEVICE_MODULE.mem_get_info(0)
    assert free1 <= free0 - 16 * MiB
    del t


def test_record_stream_defers_reuse_until_side_stream_done(device):
    DEVICE_MODULE.empty_cache()
    side = DEVICE_MODULE.Stream()
    t = torch.empty(MiB, dtype=torch.uint8, device=device)
    ptr = t.data_ptr()
    with DEVICE_MODULE.stream(side):
        _C._sleep(300)  # side stream busy "using" t
    t.record_stream(side)
    del t
    assert _C._pending_frees(0) == 1
    # While the side stream may still read it, the block must not come back.
    other = torch.empty(MiB, dtype=torch.uint8, device=device)
    assert other.data_ptr() != ptr
    side.synchronize()
    assert _C._pending_frees(0) == 0
    again = torch.empty(MiB, dtype=torch.uint8, device=device)
    assert again.data_ptr() == ptr
    del other, again


def test_out_of_memory_is_a_python_error(python):
    r = python("""
        import torch, torch_openreg
        try:
            torch.empty(1 << 40, dtype=torch.uint8, device="openreg")
        except torch.OutOfMemoryError as e:
            print("OOM", "openreg out of memory" in str(e))
        print(torch.openreg.memory_stats()["num_ooms"])
        x = torch.ones(4, device="openreg")   # still usable afterwards
        print(x.sum().item())
    """, env={"OPENREG_DEVICE_MEMORY": str(64 << 20)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["OOM", "True", "1", "4.0"]


def test_pinned_host_memory(device):
    p = torch.empty(1000, pin_memory=True)
    assert p.is_pinned()
    q = torch.arange(10.0).pin_memory()
    assert q.is_pinned()
    assert torch.equal(q, torch.arange(10.0))
    assert not torch.arange(3.0).is_pinned()


def test_pinned_host_allocator_counts_blocks_in_use_and_held(device):
    # Names and meanings as torch >= 2.10's at::HostStats on every release (2.9 keeps
    # them under other names: csrc/runtime/OpenRegHostAllocator.cpp maps them).
    DEVICE_MODULE.host_empty_cache()
    DEVICE_MODULE.reset_peak_host_memory_stats()
    before = DEVICE_MODULE.host_memory_stats()
    assert set(before) == {f"{stat}.{kind}"
                           for stat in ("active_requests", "active_bytes", "allocations",
                                        "allocated_bytes")
                           for kind in ("current", "peak", "allocated", "freed")}
    nbytes = 3 << 20
    p = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    held = DEVICE_MODULE.host_memory_stats()
    assert held["active_requests.current"] == before["active_requests.current"] + 1
    assert held["active_bytes.current"] - before["active_bytes.current"] >= nbytes
    assert held["allocations.current"] == before["allocations.current"] + 1  # cache was empty
    assert held["allocated_bytes.current"] - before["allocated_bytes.current"] >= nbytes

    del p  # back to the cache: no longer in use, still held
    cached = DEVICE_MODULE.host_memory_stats()
    assert cached["active_requests.current"] == before["active_requests.current"]
    assert cached["active_bytes.current"] == before["active_bytes.current"]
    assert cached["allocations.current"] == held["allocations.current"]
    assert cached["active_bytes.peak"] >= nbytes

    again = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)  # served from the cache
    assert DEVICE_MODULE.host_memory_stats()["allocations.allocated"] == held["allocations.allocated"]
    del again
    DEVICE_MODULE.host_empty_cache()
    DEVICE_MODULE.reset_peak_host_memory_stats()
    empty = DEVICE_MODULE.host_memory_stats()
    assert empty["allocations.current"] == before["allocations.current"]
    assert empty["allocated_bytes.current"] == before["allocated_bytes.current"]
    assert empty["active_bytes.peak"] == empty["active_bytes.current"]
