"""torch_openreg: the OpenReg PrivateUse1 backend (device type "openreg").

Importing the package registers everything: the C++ libraries (guard, hooks,
allocators, kernels) load with `_C`, the PrivateUse1 key is renamed to
"openreg", `torch.openreg` becomes the device module and the generated
`Tensor.openreg()` / `Module.openreg()` / `UntypedStorage.openreg()` methods
appear. With the `torch.backends` entry point, `import torch` does this
automatically (disable with TORCH_DEVICE_BACKEND_AUTOLOAD=0).
"""

from __future__ import annotations

import torch

# Order matters: _compat refuses an unsupported torch before _C loads against it.
from torch_openreg import _compat  # noqa: F401, I001  (fails early on unsupported torch)
from torch_openreg import _runtime  # (refuses an unknown TORCH_OPENREG_RUNTIME before _C loads)
from torch_openreg import _C  # noqa: F401  (loads libtorch_openreg and registers kernels)
from torch_openreg import _compile
from torch_openreg import distributed as _distributed
from torch_openreg import openreg as _device_module

# The device is named after the runtime (TORCH_OPENREG_RUNTIME): "openreg" by default
# (the name `ootci init` reads here), "shmreg" under the shmreg runtime.
_BACKEND = "openreg" if _runtime.RUNTIME == "openreg" else _runtime.DEVICE_TYPE


# [register]
def _register() -> None:
    # Idempotent: both `import torch_openreg` and autoload may get here, and a
    # second rename_privateuse1_backend would raise.
    if torch._C._get_privateuse1_backend_name() != _BACKEND:
        torch.utils.rename_privateuse1_backend(_BACKEND)
    if getattr(torch, _BACKEND, None) is not _device_module:
        torch._register_device_module(_BACKEND, _device_module)
    if not hasattr(torch.Tensor, f"is_{_BACKEND}"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )


_register()
_compile.install()
_distributed.register()
# [/register]


def _autoload() -> None:
    """Entry point of the `torch.backends` group: importing did the work."""


__all__ = ["_autoload"]
