"""`torch.openreg.amp`: autocast and GradScaler bound to the openreg device,
the counterparts of `torch.cuda.amp.autocast` / `torch.cuda.amp.GradScaler`.

The C++ side (csrc/amp/Autocast.cpp) registers the AutocastPrivateUse1
kernels; `torch.openreg.get_amp_supported_dtype()` tells torch.autocast which
dtypes the device accepts. These wrappers only fix the device type.
"""

from __future__ import annotations

from typing import Any

import torch

from torch_openreg._runtime import DEVICE_TYPE

__all__ = ["GradScaler", "autocast"]


class autocast(torch.amp.autocast):
    """`torch.autocast("openreg", ...)`; dtype defaults to the device's
    autocast dtype (`torch.get_autocast_dtype("openreg")`)."""

    def __init__(self, enabled: bool = True, dtype: torch.dtype | None = None,
                 cache_enabled: bool = True) -> None:
        super().__init__(DEVICE_TYPE, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """`torch.amp.GradScaler("openreg", ...)`: loss scaling for float16 training."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(DEVICE_TYPE, *args, **kwargs)
