"""`torch.openreg`: the device module of the openreg backend (like torch.cuda)."""

from __future__ import annotations

import importlib
import importlib.util
import threading
from typing import Any

import torch

import torch_openreg._C as _C
from torch_openreg._runtime import DEVICE_TYPE

_initialized = False
_init_lock = threading.Lock()


def _is_in_bad_fork() -> bool:
    return _C._is_in_bad_fork()


def is_initialized() -> bool:
    return _initialized and not _is_in_bad_fork()


# [lazy-init]
def _lazy_init() -> None:
    """Initialise the runtime once; called by torch before the first tensor is
    created on openreg. A fork()ed child of an initialised parent gets the same
    error CUDA gives: its stream worker threads did not survive the fork."""
    global _initialized
    if is_initialized():
        return
    with _init_lock:
        if is_initialized():
            return
        if _is_in_bad_fork():
            raise RuntimeError(
                "Cannot re-initialize OpenReg in forked subprocess. To use OpenReg with "
                "multiprocessing, you must use the 'spawn' start method"
            )
        _C._init()
        _initialized = True
# [/lazy-init]


# [init]
def init() -> None:
    """Initialise the runtime now (as torch.cuda.init): torch does it lazily on
    first use; an explicit call makes a fork()ed child fail early and clearly."""
    _lazy_init()
# [/init]


def is_available() -> bool:
    return device_count() > 0


def device_count() -> int:
    return _C._get_device_count()


def _device_index(device: Any, optional: bool = True) -> int:
    """int / str / torch.device / None -> device index (None -> current)."""
    if device is None:
        if not optional:
            raise ValueError(f"Expected an {DEVICE_TYPE} device, got None")
        return current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != DEVICE_TYPE:
        raise ValueError(f"Expected an {DEVICE_TYPE} device, got {device}")
    return current_device() if device.index is None else device.index


def current_device() -> int:
    return _C._get_device()


def set_device(device: Any) -> None:
    index = _device_index(device)
    if index >= 0:
        _C._set_device(index)


class device:
    """Context manager that changes the current openreg device."""

    def __init__(self, device: Any) -> None:
        self.idx = -1 if device is None else _device_index(device)
        self.prev_idx = -1

    def __enter__(self) -> None:
        self.prev_idx = _C._exchange_device(self.idx)

    def __exit__(self, *exc: object) -> None:
        if self.idx >= 0:
            _C._set_device(self.prev_idx)


# torch.cuda's name for the guard Inductor's generated code enters.
_DeviceGuard = device


def synchronize(device: Any = None) -> None:
    _lazy_init()
    _C._synchronize(_device_index(device))


def get_device_name(device: Any = None) -> str:
    return f"OpenReg emulated device {_device_index(device)}"


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.float16, torch.bfloat16]


def _is_compiled() -> bool:
    return True


from torch_openreg.openreg.memory import (  # noqa: E402
    empty_cache,
    host_empty_cache,
    host_memory_stats,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    reset_accumulated_memory_stats,
    reset_peak_host_memory_stats,
    reset_peak_memory_stats,
)
from torch_openreg.openreg.random import (  # noqa: E402
    default_generators,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from torch_openreg.openreg.streams import (  # noqa: E402
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)

# [inductor-attributes]
# Inductor's backend registration takes the PrivateUse1 device's scheduling and
# wrapper codegen from these attributes of the device module; resolving them
# lazily keeps Inductor out of `import torch`.
_INDUCTOR_ATTRIBUTES = {
    "Scheduling": ("torch_openreg._compile.inductor", "OpenRegScheduling"),
    "PythonWrapperCodegen": ("torch_openreg._compile.inductor", "OpenRegPythonWrapperCodegen"),
    "CppWrapperCodegen": ("torch._inductor.codegen.cpp_wrapper_cpu", "CppWrapperCpu"),
    "WrapperFxCodegen": ("torch._inductor.codegen.wrapper_fxir", "WrapperFxCodegen"),
}


def __getattr__(name: str) -> Any:
    if name in _INDUCTOR_ATTRIBUTES:
        module, attribute = _INDUCTOR_ATTRIBUTES[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'torch.{DEVICE_TYPE}' has no attribute {name!r}")
# [/inductor-attributes]


# Autocast support lives with the kernels (ops part); expose it when present.
if importlib.util.find_spec("torch_openreg.openreg.amp") is not None:
    from torch_openreg.openreg import amp  # noqa: E402,F401

__all__ = [
    "Event", "Stream", "StreamContext", "current_device", "current_stream",
    "default_generators", "default_stream", "device", "device_count", "empty_cache",
    "get_device_name", "get_rng_state", "get_rng_state_all", "host_empty_cache",
    "host_memory_stats", "init", "initial_seed", "is_available",
    "is_initialized", "manual_seed", "manual_seed_all", "max_memory_allocated",
    "max_memory_reserved", "mem_get_info", "memory_allocated", "memory_reserved",
    "memory_stats", "reset_accumulated_memory_stats", "reset_peak_host_memory_stats",
    "reset_peak_memory_stats", "seed",
    "seed_all", "set_device", "set_rng_state", "set_rng_state_all", "set_stream", "stream",
    "synchronize",
]
