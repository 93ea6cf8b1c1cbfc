// A Kineto activity profiler for openreg: the device's kernels, copies, memsets
// and allocations as activities in torch.profiler traces.
//
// torch.profiler.profile(activities=[ProfilerActivity.PrivateUse1]) starts
// Kineto, which configures every registered child profiler; this one switches
// on the runtime's activity tracing (libopenreg's; shmreg has none) for the
// window, forwards the correlation id of each host op to the runtime (so
// work submitted while an op runs carries its id) and, when the trace is
// processed, turns the runtime's records into Kineto activities linked to
// those ops.
//
// COMPAT(>= 2.13): torch::profiler::impl::PrivateUse1ProfilerRegistry /
// REGISTER_PRIVATEUSE1_PROFILER (torch/csrc/profiler/standalone/
// privateuse1_profiler.h). CMake compiles this file only where that header
// exists and links (OPENREG_KINETO_PLUGIN); elsewhere the ProfilerStubs
// fallback in ProfilerStubs.cpp is all there is.
// CAN REMOVE the check when MIN_SUPPORTED >= 2.13.
#include "profiler/ActivityProfiler.h"

namespace openreg::profiler {

bool has_activity_profiler() {
#ifdef OPENREG_KINETO_PLUGIN
  return true;
#else
  return false;
#endif
}

}  // namespace openreg::profiler

#ifdef OPENREG_KINETO_PLUGIN

#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <libkineto.h>

#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <c10/util/Exception.h>

#include "runtime/OpenRegFunctions.h"

namespace openreg::profiler {

namespace {

// [activity-types]
// Kineto has no device-neutral kernel/copy types: PyTorch's profiler reads
// CONCURRENT_KERNEL, GPU_MEMCPY and GPU_MEMSET as work of the PrivateUse1
// device once the backend is renamed (deviceTypeFromActivity), which is what
// makes them count as device time in key_averages(). Allocations are runtime
// calls made by the host, PRIVATEUSE1_RUNTIME.
libkineto::ActivityType kineto_type(rtActivityKind kind) {
  switch (kind) {
    case rtActivityKindKernel:
      return libkineto::ActivityType::CONCURRENT_KERNEL;
    case rtActivityKindMemcpy:
      return libkineto::ActivityType::GPU_MEMCPY;
    case rtActivityKindMemset:
      return libkineto::ActivityType::GPU_MEMSET;
    case rtActivityKindMalloc:
    case rtActivityKindFree:
      return libkineto::ActivityType::PRIVATEUSE1_RUNTIME;
  }
  return libkineto::ActivityType::PRIVATEUSE1_RUNTIME;
}
// [/activity-types]

const char* copy_name(rtMemcpyKind kind) {
  switch (kind) {
    case rtMemcpyHostToDevice:
      return "Memcpy HtoD (openreg)";
    case rtMemcpyDeviceToHost:
      return "Memcpy DtoH (openreg)";
    case rtMemcpyDeviceToDevice:
      return "Memcpy DtoD (openreg)";
    default:
      return "Memcpy HtoH (openreg)";
  }
}

std::string activity_name(const rtActivityRecord& r, const libkineto::ITraceActivity* op) {
  switch (r.kind) {
    case rtActivityKindKernel:
      // Kernels are opaque host functions to the runtime: name them after the op
      // that launched them, as a kernel name would identify it.
      return op != nullptr ? "openreg kernel: " + op->name() : "openreg kernel";
    case rtActivityKindMemcpy:
      return copy_name(r.copy_kind);
    case rtActivityKindMemset:
      return "Memset (openreg)";
    case rtActivityKindMalloc:
      return "orMalloc";
    case rtActivityKindFree:
      return "orFree";
  }
  return "openreg activity";
}

// The host-side call that submitted stream work, as CUDA traces show
// cudaLaunchKernel / cudaMemcpyAsync on the launching thread.
const char* launch_name(rtActivityKind kind) {
  switch (kind) {
    case rtActivityKindKernel:
      return "orLaunchKernel";
    case rtActivityKindMemcpy:
      return "orMemcpyAsync";
    case rtActivityKindMemset:
      return "orMemsetAsync";
    default:
      return "openreg runtime call";
  }
}

std::vector<rtActivityRecord> drain() {
  std::vector<rtActivityRecord> all;
  rtActivityRecord chunk[256];
  for (;;) {
    size_t n = 0;
    OPENREG_CHECK(rtActivityRead(chunk, std::size(chunk), &n, nullptr));
    all.insert(all.end(), chunk, chunk + n);
    if (n < std::size(chunk)) return all;
  }
}

// Row of synchronous runtime calls (blocking copies, allocations): stream ids
// start at 1, so 0 is free.
constexpr std::int64_t kSyncRow = 0;

class Session final : public libkineto::IActivityProfilerSession {
 public:
  // Kineto keeps the sessions of the last device trace and starts them again
  // in a later CPU-only window without configuring anything: a session
  // records the one window it was configured for, and is inert after that.
  void start() override {
    if (used_) return;
    used_ = true;
    live_ = true;
    OPENREG_CHECK(rtActivityEnable(1));
    status_ = libkineto::TraceStatus::RECORDING;
  }

  // Kineto calls stop(), then processTrace(), then getTraceBuffer(): the
  // activities are built here, processTrace links them to the host ops (known
  // only then) and logs them, and getTraceBuffer hands Kineto the buffer that
  // owns what the logger now points to.
  void stop() override {
    if (!live_) return;
    live_ = false;
    OPENREG_CHECK(rtActivityEnable(0));
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    int64_t first = 0;
    int64_t last = 0;
    for (const auto& r : drain()) {
      auto act = std::make_unique<libkineto::GenericTraceActivity>(
          buffer_->span, kineto_type(r.kind), activity_name(r, nullptr));
      act->startTime = r.start_ns;
      act->endTime = r.end_ns;
      act->id = static_cast<int32_t>(r.correlation_id);
      act->device = r.device;
      // One trace row per stream, as CUDA streams get.
      act->resource = static_cast<int32_t>(r.stream_id);
      act->addMetadata("device", r.device);
      act->addMetadata("stream", r.stream_id);
      act->addMetadata("correlation", r.correlation_id);
      if (r.kind != rtActivityKindKernel) {
        act->addMetadata("bytes", r.bytes);
      }
      libkineto::GenericTraceActivity* launch = nullptr;
      if (r.submit_thread != 0) {
        // The launch on the host thread and the arrow from it to the device
        // work (a flow id per record: one op may launch several kernels).
        auto host = std::make_unique<libkineto::GenericTraceActivity>(
            buffer_->span, libkineto::ActivityType::PRIVATEUSE1_RUNTIME, launch_name(r.kind));
        host->startTime = r.submit_ns;
        host->endTime = r.submit_ns;
        host->id = static_cast<int32_t>(r.correlation_id);
        host->device = pid_;
        host->resource = r.submit_thread;
        host->threadId = r.submit_thread;
        host->addMetadata("correlation", r.correlation_id);
        host->flow.id = static_cast<uint32_t>(r.id);
        host->flow.type = libkineto::kLinkAsyncCpuGpu;
        host->flow.start = 1;
        act->flow.id = static_cast<uint32_t>(r.id);
        act->flow.type = libkineto::kLinkAsyncCpuGpu;
        act->flow.start = 0;
        launch = host.get();
        buffer_->activities.push_back(std::move(host));
      }
      streams_[r.device].insert(static_cast<int64_t>(r.stream_id));
      const auto start = static_cast<int64_t>(r.start_ns);
      first = first == 0 ? start : std::min(first, start);
      last = std::max(last, static_cast<int64_t>(r.end_ns));
      pending_.push_back({act.get(), launch, r});
      buffer_->activities.push_back(std::move(act));
    }
    buffer_->span.startTime = first;
    buffer_->span.endTime = last;
    buffer_->gpuOpCount = static_cast<int>(buffer_->activities.size());
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, nullptr, 0, 0);
  }

  // [process-trace]
  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked_op, int64_t /*start*/,
                    int64_t /*end*/) override {
    for (auto& [act, launch, r] : pending_) {
      const libkineto::ITraceActivity* op = nullptr;
      if (linked_op && r.correlation_id != 0) {
        op = linked_op(static_cast<int32_t>(r.correlation_id));
      }
      if (op != nullptr) {
        act->linked = op;
        act->activityName = activity_name(r, op);
        if (launch != nullptr) launch->linked = op;
      }
      if (launch != nullptr) launch->log(logger);
      act->log(logger);
    }
    pending_.clear();
  }
  // [/process-trace]

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(0, 0, "openreg", "openreg 0");
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> rows;
    for (const auto& [device, ids] : streams_) {
      for (int64_t id : ids) {
        rows.push_back({id, id, device,
                        id == kSyncRow ? std::string("openreg sync calls")
                                       : "openreg stream " + std::to_string(id)});
      }
    }
    return rows;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::move(buffer_);
  }

  void pushCorrelationId(uint64_t id) override { OPENREG_CHECK(rtActivityPushCorrelationId(id)); }

  void popCorrelationId() override {
    // Kineto pops what it pushed on this thread; a stray pop (a window that
    // started while an op was running) finds the stack empty and is ignored.
    (void)rtActivityPopCorrelationId(nullptr);
  }

 private:
  bool used_ = false;
  bool live_ = false;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  // Activities (device work, and its host launch if it was stream work) in
  // buffer_, still to be linked and logged.
  struct Pending {
    libkineto::GenericTraceActivity* act;
    libkineto::GenericTraceActivity* launch;
    rtActivityRecord record;
  };
  std::vector<Pending> pending_;
  const int32_t pid_ = static_cast<int32_t>(::getpid());
  std::map<int, std::set<int64_t>> streams_;
};

// [activity-profiler]
class OpenRegActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }

  const std::set<libkineto::ActivityType>& availableActivities() const override {
    return activities_;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>& types, const libkineto::Config&) override {
    // Kineto configures every child profiler, also for CPU-only traces, and
    // the CPU types include PRIVATEUSE1_RUNTIME: a trace that asked for the
    // device (ProfilerActivity.PrivateUse1) is the one that wants kernels.
    // A runtime without activity tracing (shmreg) answers rtErrorNotSupported:
    // such a trace keeps its host ops and has no device rows. Disabling is a
    // harmless probe here: Kineto configures a session only when none is live.
    if (types.count(libkineto::ActivityType::CONCURRENT_KERNEL) != 0 &&
        rtActivityEnable(0) != rtErrorNotSupported) {
      return std::make_unique<Session>();
    }
    return nullptr;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t /*ts_ms*/, int64_t /*duration_ms*/, const std::set<libkineto::ActivityType>& types,
      const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_{"openreg"};
  std::set<libkineto::ActivityType> activities_{libkineto::ActivityType::PRIVATEUSE1_RUNTIME,
                                                libkineto::ActivityType::PRIVATEUSE1_DRIVER};
};

REGISTER_PRIVATEUSE1_PROFILER(OpenRegActivityProfiler);
// [/activity-profiler]

}  // namespace

}  // namespace openreg::profiler

#endif  // OPENREG_KINETO_PLUGIN
