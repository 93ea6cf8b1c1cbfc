// Python access to occl, the c10d backend (csrc/distributed/). Module.cpp
// calls openreg_init_distributed_bindings() from the module init when this
// file is linked; it only adds `_occl_init`, because the c10d classes occl
// derives from exist in pybind11 only once torch.distributed has run
// torch._C._c10d_init(). torch_openreg/distributed.py calls it, then
// registers the backend.

#include <torch/csrc/utils/pybind.h>

#include <pybind11/chrono.h>

#include "distributed/ProcessGroupOCCL.h"

#include <chrono>

namespace py = pybind11;

namespace {

// [holder]
// The pybind11 holder of the group: drops the GIL while the last reference
// goes, because ~ProcessGroupOCCL joins completion threads that may be
// running a Future callback which needs the GIL (torch's own
// ProcessGroupGloo binding does the same). Layout-compatible with
// c10::intrusive_ptr, as torch's binding of the c10d::Backend base expects.
template <typename T>
class ReleaseGilOnDestroy {
 public:
  ReleaseGilOnDestroy() = default;
  explicit ReleaseGilOnDestroy(T* raw) : impl_(c10::intrusive_ptr<T>::unsafe_reclaim_from_nonowning(raw)) {}
  explicit ReleaseGilOnDestroy(c10::intrusive_ptr<T> impl) : impl_(std::move(impl)) {}
  ReleaseGilOnDestroy(const ReleaseGilOnDestroy&) = default;
  ReleaseGilOnDestroy(ReleaseGilOnDestroy&&) noexcept = default;
  ReleaseGilOnDestroy& operator=(const ReleaseGilOnDestroy&) = default;
  ReleaseGilOnDestroy& operator=(ReleaseGilOnDestroy&&) noexcept = default;
  ~ReleaseGilOnDestroy() {
    if (impl_ && PyGILState_Check()) {
      py::gil_scoped_release no_gil;
      impl_.reset();
    }
  }
  T* get() const { return impl_.get(); }

 private:
  c10::intrusive_ptr<T> impl_;
};
// [/holder]

} // namespace

PYBIND11_DECLARE_HOLDER_TYPE(T, ReleaseGilOnDestroy<T>, true)

void openreg_init_distributed_bindings(PyObject* module) {
  auto m = py::reinterpret_borrow<py::module_>(module);
  m.def("_occl_init", [m]() mutable {
    if (py::hasattr(m, "ProcessGroupOCCL")) {
      return;
    }
    using openreg::distributed::ProcessGroupOCCL;
    py::class_<ProcessGroupOCCL, c10d::Backend, ReleaseGilOnDestroy<ProcessGroupOCCL>>(
        m, "ProcessGroupOCCL",
        "occl: the c10d backend of openreg tensors (shared-memory transport between the "
        "processes of one host)");
    m.def(
        "_create_occl_backend",
        [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
           std::chrono::milliseconds timeout) {
          return ReleaseGilOnDestroy<ProcessGroupOCCL>(
              openreg::distributed::create_process_group_occl(store, rank, size, timeout));
        },
        py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
        py::call_guard<py::gil_scoped_release>());
  });
}
