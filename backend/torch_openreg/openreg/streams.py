"""Streams and events: thin subclasses of torch.Stream / torch.Event.

All the behaviour (query, synchronize, wait_event, elapsed_time ...) comes
from torch's generic classes calling the openreg DeviceGuardImpl, exactly the
path torch.accelerator uses; only the device defaults are openreg's.
"""

from __future__ import annotations

from typing import Any

import torch

import torch_openreg._C as _C
from torch_openreg._runtime import DEVICE_TYPE


def _index(device: Any) -> int:
    from torch_openreg.openreg import _device_index

    return _device_index(device)


class Stream(torch.Stream):
    """An openreg stream from the device's pool (priority: 0 or negative = higher)."""

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs: Any) -> "Stream":
        if "stream_id" in kwargs:  # wrapping an existing stream
            return super().__new__(cls, **kwargs)
        from torch_openreg.openreg import _lazy_init

        _lazy_init()
        return super().__new__(
            cls, device=torch.device(DEVICE_TYPE, _index(device)), priority=priority
        )

    @property
    def priority(self) -> int:
        """The runtime priority of the stream (lower = higher priority)."""
        return _C._stream_priority(self.stream_id, self.device_index)


class Event(torch.Event):
    """An openreg event. Constructing one returns a plain torch.Event on openreg:
    torch.Event.elapsed_time rejects subclass instances as its argument."""

    def __new__(  # type: ignore[misc]
        cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> torch.Event:
        return torch.Event(
            device=DEVICE_TYPE, enable_timing=enable_timing, blocking=blocking,
            interprocess=interprocess,
        )


def _wrap(triple: tuple[int, int, int]) -> Stream:
    stream_id, device_index, device_type = triple
    return Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)


def current_stream(device: Any = None) -> Stream:
    return _wrap(_C._get_current_stream(_index(device)))


def default_stream(device: Any = None) -> Stream:
    return _wrap(_C._get_default_stream(_index(device)))


def set_stream(stream: torch.Stream | None) -> None:
    if stream is None:
        return
    _C._set_current_stream(stream.stream_id, stream.device_index, stream.device_type)


class StreamContext:
    """Makes `stream` current on its device (and that device current) while active."""

    def __init__(self, stream: torch.Stream | None) -> None:
        self.stream = stream
        self._prev_stream: Stream | None = None
        self._prev_device = -1

    def __enter__(self) -> torch.Stream | None:
        if self.stream is None:
            return None
        self._prev_device = _C._exchange_device(self.stream.device_index)
        self._prev_stream = current_stream(self.stream.device_index)
        set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc: object) -> None:
        if self.stream is None:
            return
        set_stream(self._prev_stream)
        _C._set_device(self._prev_device)


def stream(stream: torch.Stream | None) -> StreamContext:
    return StreamContext(stream)
