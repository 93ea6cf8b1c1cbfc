"""Dynamo's view of the openreg runtime (torch._dynamo.device_interface)."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch._dynamo.device_interface import DeviceInterface

import torch_openreg._C as _C
from torch_openreg import openreg as _device_module
from torch_openreg._runtime import DEVICE_TYPE


@dataclasses.dataclass(frozen=True)
class OpenRegDeviceProperties:
    name: str
    # Inductor sizes its CPU-style parallelism from this; openreg kernels use
    # the host's cores.
    multi_processor_count: int
    type: str = DEVICE_TYPE


def _index(device: Any = None) -> int:
    from torch_openreg.openreg import _device_index

    return _device_index(device)


# [device-interface]
class OpenRegInterface(DeviceInterface):
    device = _device_module.device  # type: ignore[assignment]
    Event = torch.Event  # type: ignore[assignment]
    Stream = _device_module.Stream  # type: ignore[assignment]

    class Worker:
        @staticmethod
        def set_device(device: int) -> None:
            _device_module.set_device(device)

        @staticmethod
        def current_device() -> int:
            return _device_module.current_device()

        @staticmethod
        def get_device_properties(device: Any = None) -> OpenRegDeviceProperties:
            import os

            index = _index(device)
            return OpenRegDeviceProperties(_device_module.get_device_name(index), os.cpu_count() or 1)

    current_device = staticmethod(_device_module.current_device)
    set_device = staticmethod(_device_module.set_device)
    device_count = staticmethod(_device_module.device_count)
    is_available = staticmethod(_device_module.is_available)
    stream = staticmethod(_device_module.stream)
    current_stream = staticmethod(_device_module.current_stream)
    set_stream = staticmethod(_device_module.set_stream)
    synchronize = staticmethod(_device_module.synchronize)
    memory_allocated = staticmethod(_device_module.memory_allocated)

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        return _C._exchange_device(device) if device >= 0 else _device_module.current_device()

    @staticmethod
    def exchange_device(device: int) -> int:
        return _C._exchange_device(device)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        _C._set_current_stream(stream_id, device_index, device_type)

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        return _C._get_raw_stream(device_idx)

    @staticmethod
    def get_compute_capability(device: Any = None) -> str:
        return ""  # no compute capability: kernels are host code

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return True

    @staticmethod
    def is_triton_capable(device: Any = None) -> bool:
        return False
# [/device-interface]
