// Device timing for the PyTorch profiler.
//
// Without a Kineto plugin, the profiler falls back to these stubs for
// PrivateUse1 (ProfilerState::KINETO_PRIVATEUSE1_FALLBACK): each op records a
// timing event on the current stream before and after it runs, and the
// profiler reports the elapsed device time.
#include <torch/csrc/profiler/stubs/base.h>

#include <c10/core/DeviceGuard.h>
#include <c10/util/ApproximateClock.h>

#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegStream.h"

namespace openreg::profiler {

namespace {

// [profiler-stubs]
struct OpenRegProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    const auto current = current_device();
    if (device != nullptr) {
      *device = current;
    }
    rtEvent_t raw = nullptr;
    OPENREG_CHECK(rtEventCreate(&raw));
    *event = std::shared_ptr<void>(raw, [](void* e) {
      OPENREG_WARN(rtEventDestroy(static_cast<rtEvent_t>(e)));
    });
    if (cpu_ns != nullptr) {
      *cpu_ns = c10::getTime();
    }
    OPENREG_CHECK(rtEventRecord(raw, getCurrentRawStream(current)));
  }

  // Microseconds, like the CUDA stubs.
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* start,
                const torch::profiler::impl::ProfilerVoidEventStub* end) const override {
    auto* a = static_cast<rtEvent_t>(start->get());
    auto* b = static_cast<rtEvent_t>(end->get());
    OPENREG_CHECK(rtEventSynchronize(a));
    OPENREG_CHECK(rtEventSynchronize(b));
    float ms = 0;
    OPENREG_CHECK(rtEventElapsedTime(&ms, a, b));
    return ms * 1000.0f;
  }

  void onEachDevice(std::function<void(int)> op) const override {
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, i));
      op(i);
    }
  }

  void synchronize() const override {
    OPENREG_CHECK(rtDeviceSynchronize());
  }

  bool enabled() const override { return true; }

  // No external tracer to annotate ranges for.
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
};
// [/profiler-stubs]

struct Register {
  Register() {
    static OpenRegProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
} register_stubs;

} // namespace

} // namespace openreg::profiler
