"""Caching allocator statistics and control (the torch.cuda.memory_* API)."""

from __future__ import annotations

from typing import Any

import torch_openreg._C as _C


def _index(device: Any) -> int:
    from torch_openreg.openreg import _device_index

    return _device_index(device)


def memory_stats(device: Any = None) -> dict[str, int]:
    """Flat, sorted dict with "<stat>.<all|small_pool|large_pool>.<current|peak|allocated|freed>"."""
    return dict(sorted(_C._memory_stats(_index(device)).items()))


def memory_allocated(device: Any = None) -> int:
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device: Any = None) -> int:
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device: Any = None) -> int:
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device: Any = None) -> int:
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device: Any = None) -> None:
    _C._reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    _C._reset_accumulated_memory_stats(_index(device))


def empty_cache() -> None:
    """Return every cached, unused block of every device to the runtime."""
    _C._empty_cache()


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of the device arena, as reported by the runtime."""
    return tuple(_C._mem_get_info(_index(device)))  # type: ignore[return-value]


def host_memory_stats() -> dict[str, int]:
    """The pinned host allocator's counters, as torch.cuda.host_memory_stats: flat, sorted
    "<stat>.<current|peak|allocated|freed>" for active_requests / active_bytes (blocks
    handed out) and allocations / allocated_bytes (blocks held, in use or cached). The
    names are torch 2.10's on every supported release."""
    return dict(sorted(_C._host_memory_stats().items()))


def reset_peak_host_memory_stats() -> None:
    _C._reset_peak_host_memory_stats()


def host_empty_cache() -> None:
    """Return every cached, unused pinned block to the runtime."""
    _C._host_empty_cache()
