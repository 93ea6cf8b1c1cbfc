// Python access to the native-kernel switch and counters
// (torch_openreg._C._set_native_kernels_enabled & co). Module.cpp calls
// openreg_init_ops_bindings() from the module init when this file is linked.

#include <torch/csrc/utils/pybind.h>

#include "aten/launch/KernelConfig.h"
#include "aten/launch/Launch.h"

#include <cstdint>

namespace py = pybind11;

void openreg_init_ops_bindings(PyObject* module) {
  auto m = py::reinterpret_borrow<py::module_>(module);
  m.def("_set_native_kernels_enabled", &openreg::native::set_native_kernels_enabled,
        "Route the native kernels to the CPU fallback (False) or back (True).");
  m.def("_native_kernels_enabled", &openreg::native::native_kernels_enabled);
  m.def("_kernel_counters", [] {
    const auto counters = openreg::native::kernel_counters();
    py::dict out;
    out["native_launches"] = counters.native_launches;
    out["cpu_fallbacks"] = counters.cpu_fallbacks;
    return out;
  });
  m.def("_reset_kernel_counters", &openreg::native::reset_kernel_counters);
  // Address of openreg_launch_host_kernel, handed to torch.compile's kernels.
  m.def("_host_kernel_launcher", [] { return reinterpret_cast<uintptr_t>(&openreg_launch_host_kernel); });
}
