// Python bindings of torch_openreg._C: the only place that sees Python.h and
// pybind11. Keep it thin: marshal arguments, call into libtorch_openreg.
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include <c10/core/DeviceGuard.h>

#include "profiler/ActivityProfiler.h"
#include "runtime/OpenRegDeviceAllocator.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegGenerator.h"
#include "runtime/OpenRegHostAllocator.h"
#include "runtime/OpenRegStream.h"
#include "serialization/BackendMeta.h"

#include <chrono>
#include <memory>
#include <thread>

namespace py = pybind11;

// Bindings contributed by other parts of the backend (the ops' kernel switch
// ...). Weak so the module still links while no such file exists.
__attribute__((weak)) void openreg_init_ops_bindings(PyObject* module);
__attribute__((weak)) void openreg_init_distributed_bindings(PyObject* module);

namespace {

using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;

c10::DeviceIndex resolve(c10::DeviceIndex device) {
  return device < 0 ? openreg::current_device() : device;
}

py::tuple pack_stream(const c10::Stream& s) {
  return py::make_tuple(s.id(), s.device_index(), static_cast<int64_t>(s.device_type()));
}

// Flat "allocated_bytes.all.current"-style keys, as torch.cuda.memory_stats.
py::dict memory_stats(c10::DeviceIndex device) {
  const auto stats = openreg::device_allocator().getDeviceStats(resolve(device));
  py::dict out;
  auto add_array = [&](const char* name, const StatArray& array) {
    const char* pools[] = {"all", "small_pool", "large_pool"};
    for (size_t p = 0; p < 3; ++p) {
      const auto& stat = array[p];
      const std::string prefix = std::string(name) + "." + pools[p] + ".";
      out[py::str(prefix + "current")] = stat.current;
      out[py::str(prefix + "peak")] = stat.peak;
      out[py::str(prefix + "allocated")] = stat.allocated;
      out[py::str(prefix + "freed")] = stat.freed;
    }
  };
  add_array("allocation", stats.allocation);
  add_array("segment", stats.segment);
  add_array("active", stats.active);
  add_array("inactive_split", stats.inactive_split);
  add_array("allocated_bytes", stats.allocated_bytes);
  add_array("reserved_bytes", stats.reserved_bytes);
  add_array("active_bytes", stats.active_bytes);
  add_array("inactive_split_bytes", stats.inactive_split_bytes);
  add_array("requested_bytes", stats.requested_bytes);
  out["num_alloc_retries"] = stats.num_alloc_retries;
  out["num_ooms"] = stats.num_ooms;
  out["num_device_alloc"] = stats.num_device_alloc;
  out["num_device_free"] = stats.num_device_free;
  return out;
}

void init_bindings(py::module_& m) {
  // Device / lifecycle
  m.def("_init", [] { openreg::lazy_init(); });
  m.def("_has_kineto_plugin", [] { return openreg::profiler::has_activity_profiler(); });
  m.def("_is_initialized", [] { return openreg::is_initialized(); });
  m.def("_is_in_bad_fork", [] { return openreg::is_in_bad_fork(); });
  m.def("_get_device_count", [] { return openreg::device_count(); });
  m.def("_get_device", [] { return openreg::current_device(); });
  m.def("_set_device", [](c10::DeviceIndex d) { openreg::set_device(d); });
  m.def("_exchange_device", [](c10::DeviceIndex d) { return openreg::exchange_device(d); });
  m.def("_synchronize", [](c10::DeviceIndex device) {
    py::gil_scoped_release no_gil;
    const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, resolve(device)));
    OPENREG_CHECK(rtDeviceSynchronize());
  });

  // Streams: (stream_id, device_index, device_type) triples, as torch.Stream takes.
  m.def("_get_current_stream", [](c10::DeviceIndex d) {
    return pack_stream(openreg::getCurrentStream(resolve(d)).unwrap());
  });
  // The raw rtStream_t of the current stream (Dynamo's get_raw_stream).
  m.def("_get_raw_stream", [](c10::DeviceIndex d) {
    return reinterpret_cast<uintptr_t>(openreg::getCurrentRawStream(resolve(d)));
  });
  m.def("_get_default_stream", [](c10::DeviceIndex d) {
    return pack_stream(openreg::getDefaultStream(resolve(d)).unwrap());
  });
  m.def("_set_current_stream", [](int64_t id, c10::DeviceIndex device, int64_t type) {
    openreg::setCurrentStream(openreg::OpenRegStream(c10::Stream::unpack3(
        id, device, static_cast<c10::DeviceType>(type))));
  });
  m.def("_stream_priority", [](int64_t id, c10::DeviceIndex device) {
    return openreg::OpenRegStream(
               c10::Stream::unpack3(id, device, c10::DeviceType::PrivateUse1))
        .priority();
  });
  m.def("_stream_priority_range", [] {
    const auto [least, greatest] = openreg::streamPriorityRange();
    return py::make_tuple(least, greatest);
  });

  // Test helper (as torch.cuda._sleep): keeps the current stream busy for `ms`
  // so tests can observe not-yet-finished work deterministically.
  m.def("_sleep", [](int64_t ms) {
    auto* arg = new int64_t(ms);
    OPENREG_CHECK(rtLaunchHostFunc(
        openreg::getCurrentRawStream(openreg::current_device()),
        [](void* p) {
          std::unique_ptr<int64_t> duration(static_cast<int64_t*>(p));
          std::this_thread::sleep_for(std::chrono::milliseconds(*duration));
        },
        arg));
  });

  // Random
  m.def("_get_default_generator", [](c10::DeviceIndex d) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(openreg::default_generator(resolve(d))));
  });

  // Memory
  m.def("_memory_stats", &memory_stats);
  m.def("_reset_peak_memory_stats", [](c10::DeviceIndex d) {
    openreg::device_allocator().resetPeakStats(resolve(d));
  });
  m.def("_reset_accumulated_memory_stats", [](c10::DeviceIndex d) {
    openreg::device_allocator().resetAccumulatedStats(resolve(d));
  });
  m.def("_host_memory_stats", [] {
    py::dict out;
    for (const auto& [name, value] : openreg::host_memory_stats()) {
      out[py::str(name)] = value;
    }
    return out;
  });
  m.def("_reset_peak_host_memory_stats", [] { openreg::reset_peak_host_memory_stats(); });
  m.def("_host_empty_cache", [] {
    py::gil_scoped_release no_gil;
    openreg::host_empty_cache();
  });
  m.def("_empty_cache", [] {
    py::gil_scoped_release no_gil;
    openreg::device_allocator().emptyCache();
  });
  m.def("_mem_get_info", [](c10::DeviceIndex d) {
    return openreg::device_allocator().getMemoryInfo(resolve(d));
  });
  m.def("_pending_frees", [](c10::DeviceIndex d) {
    return openreg::device_allocator().pendingFrees(resolve(d));
  });
  m.def("_record_stream", [](const at::Tensor& t, int64_t id, c10::DeviceIndex device) {
    openreg::device_allocator().recordStream(
        t.storage().data_ptr(),
        c10::Stream::unpack3(id, device, c10::DeviceType::PrivateUse1));
  });

  // Serialization: the backend-meta flag carried through torch.save/load.
  m.def("_set_nz_format", &openreg::serialization::set_nz_format);
  m.def("_get_nz_format", &openreg::serialization::nz_format);
}

} // namespace

extern "C" __attribute__((visibility("default"))) PyObject* openreg_init_module() {
  static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "torch_openreg._C", nullptr, -1, nullptr};
  PyObject* module = PyModule_Create(&def);
  if (module == nullptr) {
    return nullptr;
  }
  try {
    auto m = py::reinterpret_borrow<py::module_>(module);
    init_bindings(m);
    if (openreg_init_ops_bindings != nullptr) {
      openreg_init_ops_bindings(module);
    }
    if (openreg_init_distributed_bindings != nullptr) {
      openreg_init_distributed_bindings(module);
    }
  } catch (py::error_already_set& e) {
    Py_DECREF(module);
    e.restore();
    return nullptr;
  } catch (const std::exception& e) {
    Py_DECREF(module);
    PyErr_SetString(PyExc_ImportError, e.what());
    return nullptr;
  }
  return module;
}
