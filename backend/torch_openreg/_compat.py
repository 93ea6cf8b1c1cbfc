"""Version switches for the torch releases this package supports.

Every branch is annotated `COMPAT(>= X.Y): <upstream change, PR #>` and
`CAN REMOVE when MIN_SUPPORTED >= X.Y`, like csrc/compat/TorchVersion.h.
"""

from __future__ import annotations

import torch

MIN_SUPPORTED = (2, 9)


def torch_version() -> tuple[int, int]:
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


TORCH_VERSION = torch_version()

if TORCH_VERSION < MIN_SUPPORTED:
    raise ImportError(
        f"torch_openreg supports torch >= {MIN_SUPPORTED[0]}.{MIN_SUPPORTED[1]}, "
        f"found {torch.__version__}"
    )


# COMPAT(>= 2.11): torch.Stream.native_handle exposes the backend's raw stream
# through DeviceGuardImplInterface::getStreamNativeHandle (PR #171040).
# CAN REMOVE when MIN_SUPPORTED >= 2.11.
HAS_STREAM_NATIVE_HANDLE = TORCH_VERSION >= (2, 11)

# COMPAT(>= 2.10): torch.accelerator.get_device_capability, answered by
# DeviceGuardImplInterface::getDeviceCapability (PR #165631).
# CAN REMOVE when MIN_SUPPORTED >= 2.10.
HAS_DEVICE_CAPABILITY = TORCH_VERSION >= (2, 10)
