"""torch.compile on openreg: Dynamo's device interface, Inductor's codegen
for the device, and the `openreg` compile backend.

Importing Dynamo costs ~2 s, too much for `import torch` (which autoloads this
package), so nothing here imports it eagerly:

- the compile backend is a `torch_dynamo_backends` entry point (`backend.py`);
- Inductor finds the scheduling and wrapper codegen through attributes of the
  device module (`torch.openreg.Scheduling` & co., resolved lazily from
  `inductor.py`), which its backend registration looks up for PrivateUse1;
- Dynamo's device interface is registered by a post-import hook on
  `torch._dynamo.device_interface` (or at once when it is already imported).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from torch_openreg._runtime import DEVICE_TYPE

_DEVICE_INTERFACE_MODULE = "torch._dynamo.device_interface"


def _register_device_interface(module: ModuleType) -> None:
    from torch_openreg._compile.device_interface import OpenRegInterface

    module.register_interface_for_device(DEVICE_TYPE, OpenRegInterface)


# [post-import-hook]
class _AfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Runs `then(module)` right after `name` is imported, once."""

    def __init__(self, name: str, then: Callable[[ModuleType], None]) -> None:
        self.name, self.then = name, then
        self._loader: importlib.abc.Loader | None = None

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # find the real spec with the other finders
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return spec
        self._loader, spec.loader = spec.loader, self
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        assert self._loader is not None
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        assert self._loader is not None
        self._loader.exec_module(module)
        self.then(module)
# [/post-import-hook]


def install() -> None:
    module = sys.modules.get(_DEVICE_INTERFACE_MODULE)
    if module is not None:
        _register_device_interface(module)
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(_DEVICE_INTERFACE_MODULE, _register_device_interface))
