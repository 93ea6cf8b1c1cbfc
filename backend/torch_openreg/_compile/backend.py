"""The `openreg` compile backend: `torch.compile(model, backend="openreg")`.

Inductor with the openreg codegen (`inductor.py`); registered as a
`torch_dynamo_backends` entry point, so `torch._dynamo.list_backends()` lists
it without this module being imported before it is used.
"""

from __future__ import annotations

from typing import Any


# [compile-backend]
def openreg_backend(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
    from torch._inductor.compile_fx import compile_fx

    import torch_openreg._compile.inductor  # noqa: F401  (device op overrides)

    return compile_fx(gm, example_inputs, **kwargs)
# [/compile-backend]
