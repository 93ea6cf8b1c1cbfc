"""Inductor code generation for openreg.

openreg memory is host memory behind an access gate that is open only while a
kernel runs on a stream's worker thread. Inductor's C++ (CPU) kernels are
therefore the device's kernels too; what changes is how they are called: the
Python binding of each kernel, instead of calling it, packs its arguments and
enqueues the call on the current openreg stream (`openreg_launch_host_kernel`
in libtorch_openreg). Everything else Inductor emits — allocations, extern
kernels such as mm, copies — is ordinary device work on the same stream, so
the stream orders it all as in eager mode, and the wrapper never waits.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from typing import Any

from torch._inductor.codecache import CppPythonBindingsCodeCache
from torch._inductor.codegen.common import DeviceOpOverrides, register_device_op_overrides
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu  # noqa: F401  (device module attribute)
from torch._inductor.codegen.wrapper import PythonWrapperCodegen

import torch_openreg._C as _C
from torch_openreg._runtime import DEVICE_TYPE

_LAUNCHER_ENV = "_TORCH_OPENREG_HOST_KERNEL_LAUNCHER"


# [kernel-binding]
class OpenRegKernelBindings(CppPythonBindingsCodeCache):
    """Python bindings that launch a C++ kernel on the current openreg stream.

    The arguments are parsed on the calling thread (tensor data pointers are
    plain addresses there), copied into a heap tuple, and the kernel runs
    from that tuple on the stream's worker. The launcher's address comes from
    the environment, as Inductor's own data-pointer helper does, so the
    source, and with it the compile cache key, is the same in every process.
    """

    cache: dict[str, Any] = {}
    call_entry_function = "openreg_launch({}); Py_RETURN_NONE;"
    extra_parse_arg = textwrap.dedent(
        """
        #include <stdexcept>
        #include <tuple>
        #include <utility>

        static int (*openreg_launch_host_kernel)(void (*)(void*), void*);

        template <class... A> static void openreg_launch(A... a) {
            if (openreg_launch_host_kernel == nullptr) {
                const char* addr = std::getenv("LAUNCHER_ENV");
                if (addr == nullptr) throw std::runtime_error("LAUNCHER_ENV is not set");
                openreg_launch_host_kernel = reinterpret_cast<int (*)(void (*)(void*), void*)>(
                    std::strtoull(addr, nullptr, 10));
            }
            auto* args = new std::tuple<A...>(a...);
            auto run = [](void* p) {
                auto* packed = static_cast<std::tuple<A...>*>(p);
                std::apply([](auto... v) { kernel(v...); }, *packed);
                delete packed;
            };
            if (openreg_launch_host_kernel(run, args) != 0) {
                delete args;
                throw std::runtime_error("openreg: launching a compiled kernel failed");
            }
        }
        """
    ).replace("LAUNCHER_ENV", _LAUNCHER_ENV).replace("{", "{{").replace("}", "}}")

    @classmethod
    def _load_library_inner(cls, path: str, key: str) -> Any:
        os.environ[_LAUNCHER_ENV] = str(_C._host_kernel_launcher())
        return super()._load_library_inner(path, key)


def load_kernel(argtypes: Sequence[str], source_code: str) -> Any:
    """What the generated wrapper calls instead of async_compile.cpp_pybinding."""
    return OpenRegKernelBindings.load_pybinding(argtypes, source_code)
# [/kernel-binding]


# [wrapper-codegen]
class OpenRegPythonWrapperCodegen(PythonWrapperCodegen):
    """The Python wrapper, with kernels bound through OpenRegKernelBindings."""

    @staticmethod
    def create(is_subgraph: bool, subgraph_name: str | None, parent_wrapper: Any,
               partition_signatures: Any = None) -> OpenRegPythonWrapperCodegen:
        if is_subgraph:
            # Subgraph wrappers (control flow) are Inductor's own class; our
            # kernels still bind through define_kernel below.
            return PythonWrapperCodegen.create(is_subgraph, subgraph_name, parent_wrapper,
                                               partition_signatures)
        return OpenRegPythonWrapperCodegen()

    def write_header(self) -> None:
        super().write_header()
        self.imports.writeline("from torch_openreg._compile.inductor import load_kernel as openreg_load_kernel")

    def define_kernel(self, kernel_name: str, kernel_body: str, *args: Any, **kwargs: Any) -> None:
        kernel_body = kernel_body.replace("async_compile.cpp_pybinding(", "openreg_load_kernel(", 1)
        super().define_kernel(kernel_name, kernel_body, *args, **kwargs)

    def _generate_kernel_call_helper(self, kernel_name: str, call_args: Any, *, device: Any = None,
                                     triton: bool = True, **kwargs: Any) -> None:
        # A C++ kernel on openreg is called like a CPU one: its binding
        # enqueues it on the current stream by itself.
        if not triton and device is not None and device.type == DEVICE_TYPE:
            self.writeline(self.wrap_kernel_call(kernel_name, call_args))
            return
        super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)
# [/wrapper-codegen]


class OpenRegScheduling(CppScheduling):
    """Inductor's C++ scheduling: openreg kernels are host C++ over device pointers."""


# [cpu-like-scheduling]
# Inductor's scheduler tells C++-codegen devices from SIMD (Triton) ones by
# `device.type == "cpu"`. One of its fusion steps, reindexing a pointwise node
# to a reduction's loops, assumes SIMD groups for any other device and fails
# on the C++ scheduling's groups; it is skipped for openreg as it is for CPU.
def _skip_reindex_for_openreg() -> None:
    from torch._inductor.scheduler import Scheduler

    reindex = getattr(Scheduler, "_try_reindex_pointwise_for_reduction", None)
    if reindex is None or getattr(reindex, "_openreg_aware", False):  # absent before torch 2.13
        return

    def try_reindex(self: Any, node1: Any, node2: Any) -> bool:
        for node in (node1, node2):
            device = node.get_device()
            if device is not None and device.type == DEVICE_TYPE:
                return False
        return reindex(self, node1, node2)

    try_reindex._openreg_aware = True  # type: ignore[attr-defined]
    Scheduler._try_reindex_pointwise_for_reduction = try_reindex  # type: ignore[method-assign]


_skip_reindex_for_openreg()
# [/cpu-like-scheduling]


# [device-op-overrides]
class OpenRegDeviceOpOverrides(DeviceOpOverrides):
    def import_get_raw_stream_as(self, name: str) -> str:
        return f"from torch_openreg._C import _get_raw_stream as {name}"

    def set_device(self, device_idx: int) -> str:
        return f"torch.{DEVICE_TYPE}.set_device({device_idx})"

    def synchronize(self) -> str:
        return f"torch.{DEVICE_TYPE}.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.{DEVICE_TYPE}._DeviceGuard({device_idx})"

    def cpp_kernel_type(self) -> str:
        return "void*"
# [/device-op-overrides]


register_device_op_overrides(DEVICE_TYPE, OpenRegDeviceOpOverrides())
