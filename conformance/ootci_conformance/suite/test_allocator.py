"""The device allocator and its statistics, through torch.accelerator's memory API."""

import pytest
import torch

pytestmark = pytest.mark.conformance("allocator", "required")

MiB = 1 << 20


def test_allocation_is_counted_and_released(dut):
    torch.accelerator.synchronize()
    before = torch.accelerator.memory_allocated(0)
    t = torch.empty(MiB, dtype=torch.uint8, device=dut.device)
    assert torch.accelerator.memory_allocated(0) - before >= MiB
    del t
    assert torch.accelerator.memory_allocated(0) == before


def test_reserved_covers_allocated(dut):
    t = torch.empty(MiB, dtype=torch.uint8, device=dut.device)
    assert torch.accelerator.memory_reserved(0) >= torch.accelerator.memory_allocated(0) >= MiB
    del t


def test_empty_cache_releases_cached_blocks(dut):
    t = torch.empty(4 * MiB, dtype=torch.uint8, device=dut.device)
    del t
    torch.accelerator.empty_cache()
    assert torch.accelerator.memory_reserved(0) == torch.accelerator.memory_allocated(0)


def test_peak_and_reset_peak(dut):
    torch.accelerator.reset_peak_memory_stats(0)
    base = torch.accelerator.memory_allocated(0)
    big = torch.empty(8 * MiB, dtype=torch.uint8, device=dut.device)
    del big
    assert torch.accelerator.max_memory_allocated(0) >= base + 8 * MiB
    torch.accelerator.reset_peak_memory_stats(0)
    assert torch.accelerator.max_memory_allocated(0) == torch.accelerator.memory_allocated(0)


def test_memory_stats_has_the_standard_keys(dut):
    stats = torch.accelerator.memory_stats(0)
    for key in ("allocated_bytes.all.current", "reserved_bytes.all.current",
                "allocated_bytes.all.peak"):
        assert key in stats
