"""occl, the c10d backend of openreg tensors (C++ in csrc/distributed/).

Importing torch_openreg registers it, so that

    dist.init_process_group("occl", rank=rank, world_size=n)            # openreg only
    dist.init_process_group("cpu:gloo,openreg:occl", ...)               # both devices

work in every process of one host; openreg is then also the device whose
default backend is occl (`init_process_group()` without a backend picks it,
since torch.accelerator names openreg).
"""

from __future__ import annotations

import warnings
from datetime import timedelta

import torch

from torch_openreg import _C
from torch_openreg._runtime import DEVICE_TYPE

BACKEND_NAME = "occl"


# [register-backend]
def register() -> None:
    """Register occl with torch.distributed (idempotent; no-op without c10d)."""
    import torch.distributed as dist

    if not dist.is_available() or BACKEND_NAME in dist.Backend.backend_list:
        return
    if not hasattr(_C, "_occl_init"):
        # A _C built before csrc/distributed/ existed: `pip install` of this
        # tree imports torch, which autoloads the stale package mid-build.
        return
    try:
        _C._occl_init()  # the pybind11 class needs c10d's Backend class, bound by now
    except RuntimeError as exc:
        # pybind11 could not find torch's c10d classes (a torch whose pybind11
        # internals differ from the headers this was built with): the device
        # still works, only occl is missing, and says so.
        warnings.warn(f"torch_openreg: the occl c10d backend is unavailable: {exc}",
                      RuntimeWarning, stacklevel=2)
        return
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, devices=[DEVICE_TYPE])


def _create_backend(
    store: torch.distributed.Store, rank: int, world_size: int, timeout: timedelta
) -> torch.distributed.Backend:
    return _C._create_occl_backend(store, rank, world_size, timeout)
# [/register-backend]
