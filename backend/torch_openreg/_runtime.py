"""Which runtime this process uses, and so the name of its torch device.

One build carries both runtimes (csrc/runtime/rt/): the emulated `openreg`
runtime and `shmreg`, whose device memory lives in a server process. The C++
side reads the same variable when it first touches a runtime; this module
validates it first (an unknown name aborts there, with no Python error) and
names PrivateUse1 after the runtime, so `torch.device("shmreg")` means the
shmreg runtime and a result can never be mistaken for the other runtime's.
"""

from __future__ import annotations

import os

# [runtime-select]
RUNTIMES = ("openreg", "shmreg")
RUNTIME = os.environ.get("TORCH_OPENREG_RUNTIME") or "openreg"
if RUNTIME not in RUNTIMES:
    raise ImportError(
        f"torch_openreg: TORCH_OPENREG_RUNTIME={RUNTIME!r} is not one of {', '.join(RUNTIMES)}")
DEVICE_TYPE = RUNTIME
# [/runtime-select]
