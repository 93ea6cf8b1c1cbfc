#include "distributed/ProcessGroupOCCL.h"

#include <ATen/core/ivalue.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>

#include "distributed/Reduce.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegStream.h"

namespace openreg::distributed {

namespace {

using Clock = std::chrono::steady_clock;

// Destroying a group waits this long for operations still in flight before it
// aborts them (their peers may never issue the matching call).
constexpr auto kDrainGrace = std::chrono::seconds(5);

size_t env_size(const char* name, size_t fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    return fallback;
  }
  char* end = nullptr;
  const unsigned long long parsed = std::strtoull(value, &end, 10);
  return (end != nullptr && *end == '\0' && parsed > 0) ? static_cast<size_t>(parsed) : fallback;
}

size_t nbytes(const at::Tensor& t) { return t.numel() * t.element_size(); }
char* bytes_of(const at::Tensor& t) { return static_cast<char*>(t.data_ptr()); }

void check_tensor(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
              "occl: ", what, " must be an openreg tensor, got one on ", t.device());
  TORCH_CHECK(t.layout() == c10::kStrided, "occl: ", what, " must be dense");
  TORCH_CHECK(t.is_contiguous(), "occl: ", what, " must be contiguous");
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "occl: ", what, " takes exactly one tensor per rank (got ",
              tensors.size(), ")");
  check_tensor(tensors[0], what);
  return tensors[0];
}

ReduceKind kind_of(const c10d::ReduceOp& op) {
  switch (static_cast<c10d::ReduceOp::RedOpType>(op)) {
    case c10d::ReduceOp::SUM: return ReduceKind::Sum;
    case c10d::ReduceOp::AVG: return ReduceKind::Avg;
    case c10d::ReduceOp::PRODUCT: return ReduceKind::Product;
    case c10d::ReduceOp::MIN: return ReduceKind::Min;
    case c10d::ReduceOp::MAX: return ReduceKind::Max;
    default:
      TORCH_CHECK(false, "occl: ReduceOp ", static_cast<int>(static_cast<c10d::ReduceOp::RedOpType>(op)),
                  " is not supported (SUM, AVG, PRODUCT, MIN, MAX are)");
  }
}

// Rank i's share of `total` elements in the all_reduce's reduce-scatter phase.
struct Share {
  size_t offset;  // bytes
  size_t bytes;
};
Share share_of(int64_t numel, size_t element, int size, int i) {
  const int64_t base = numel / size;
  const int64_t extra = numel % size;
  const int64_t begin = i * base + std::min<int64_t>(i, extra);
  const int64_t count = base + (i < extra ? 1 : 0);
  return {static_cast<size_t>(begin) * element, static_cast<size_t>(count) * element};
}

std::string random_uid() {
  std::random_device device;
  std::mt19937_64 gen((static_cast<uint64_t>(device()) << 32) ^ device() ^
                      static_cast<uint64_t>(getpid()) ^
                      static_cast<uint64_t>(Clock::now().time_since_epoch().count()));
  std::ostringstream out;
  out << std::hex << gen();
  return out.str();
}

std::vector<uint8_t> to_bytes(const std::string& s) { return {s.begin(), s.end()}; }

} // namespace

// ---- WorkOCCL ---------------------------------------------------------------

WorkOCCL::WorkOCCL(int rank, c10d::OpType type, c10::DeviceIndex device,
                   std::vector<at::Tensor> outputs, bool host_blocking)
    : c10d::Work(rank, type),
      device_(device),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
      host_blocking_(host_blocking) {}

WorkOCCL::~WorkOCCL() {
  if (end_ != nullptr) {
    OPENREG_WARN(rtEventDestroy(end_));
  }
}

// [work-wait-impl]
bool WorkOCCL::wait(std::chrono::milliseconds timeout) {
  if (host_blocking_) {
    // Work::wait blocks until complete() ran, rethrows, then synchronize()s.
    return c10d::Work::wait(timeout);
  }
  synchronize();
  std::lock_guard<std::mutex> lock(mutex_);
  if (completed_ && exception_) {
    std::rethrow_exception(exception_);
  }
  return true;
}

void WorkOCCL::synchronize() {
  OPENREG_CHECK(rtStreamWaitEvent(openreg::getCurrentRawStream(device_), end_, 0));
}
// [/work-wait-impl]

c10::intrusive_ptr<c10::ivalue::Future> WorkOCCL::getFuture() { return future_; }

std::vector<at::Tensor> WorkOCCL::result() { return outputs_; }

void WorkOCCL::complete(std::exception_ptr error) {
  finish(error);
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

// ---- ProcessGroupOCCL: setup and lanes --------------------------------------

struct ProcessGroupOCCL::Task {
  Body body;
  ShmTransport* transport;
  std::chrono::milliseconds timeout;
  std::shared_ptr<std::exception_ptr> error;
  ProcessGroupOCCL* group;
};

ProcessGroupOCCL::ProcessGroupOCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                   int size, std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), timeout_(timeout) {
  // [rendezvous]
  // The store is the group's own (a PrefixStore), so the keys are too. Rank
  // 0 names the group's segments; every rank creates its own, maps everyone
  // else's once all exist, and unlinks its name once all are mapped.
  if (rank == 0) {
    store->set("occl/uid", to_bytes(random_uid()));
  }
  const auto uid = store->get("occl/uid");
  TransportConfig config;
  config.slots = env_size("OCCL_SLOTS", config.slots);
  config.slot_bytes = env_size("OCCL_SLOT_BYTES", config.slot_bytes);
  transport_ = std::make_unique<ShmTransport>(
      rank, size, "/occl." + std::string(uid.begin(), uid.end()), config);
  auto all = [&](const std::string& stage) {
    store->set("occl/" + stage + "/" + std::to_string(rank), to_bytes("1"));
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) {
      keys.push_back("occl/" + stage + "/" + std::to_string(r));
    }
    store->wait(keys);
  };
  all("created");
  transport_->open_peers();
  all("mapped");
  transport_->unlink_own();
  // [/rendezvous]
}

ProcessGroupOCCL::~ProcessGroupOCCL() {
  std::vector<Lane*> lanes;
  {
    std::lock_guard<std::mutex> lock(lanes_mutex_);
    stopping_ = true;
    for (auto& l : lanes_) {
      if (l) {
        lanes.push_back(l.get());
      }
    }
  }
  auto drained = [&] {
    for (auto* l : lanes) {
      std::lock_guard<std::mutex> lock(l->mutex);
      if (!l->pending.empty()) {
        return false;
      }
    }
    return true;
  };
  const auto give_up = Clock::now() + kDrainGrace;
  while (!drained() && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!drained()) {
    transport_->abort();
  }
  for (auto* l : lanes) {
    {
      std::lock_guard<std::mutex> lock(l->mutex);
      l->cv.notify_all();
    }
    l->completer.join();
    OPENREG_WARN(rtStreamDestroy(l->stream));
  }
}

c10::DeviceIndex ProcessGroupOCCL::bind_device(const std::vector<at::Tensor>& tensors) {
  c10::DeviceIndex device = tensors.empty() ? (device_ >= 0 ? device_ : openreg::current_device())
                                            : tensors.front().device().index();
  for (const auto& t : tensors) {
    TORCH_CHECK(t.device().index() == device, "occl: all tensors of one call must be on one device");
  }
  std::lock_guard<std::mutex> lock(lanes_mutex_);
  if (device_ < 0) {
    device_ = device;
  }
  TORCH_CHECK(device == device_, "occl: this group runs on openreg:", static_cast<int>(device_),
              ", got a tensor on openreg:", static_cast<int>(device),
              " (one device per process and group, as NCCL)");
  return device;
}

ProcessGroupOCCL::Lane& ProcessGroupOCCL::lane(LaneId id) {
  std::lock_guard<std::mutex> lock(lanes_mutex_);
  auto& slot = lanes_[static_cast<int>(id)];
  if (!slot) {
    auto l = std::make_unique<Lane>();
    const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
    OPENREG_CHECK(rtStreamCreate(&l->stream));
    Lane* raw = l.get();
    l->completer = std::thread([this, raw] { complete_loop(*raw); });
    slot = std::move(l);
  }
  return *slot;
}

// [completion]
// One thread per lane turns the stream's progress into Work completion: it
// sleeps in rtEventSynchronize (no polling) and then marks the Work and its
// Future, so Future callbacks (DDP's) never run on a device stream's thread.
void ProcessGroupOCCL::complete_loop(Lane& l) {
  for (;;) {
    Pending next;
    {
      std::unique_lock<std::mutex> lock(l.mutex);
      l.cv.wait(lock, [&] { return stopping_ || !l.pending.empty(); });
      if (l.pending.empty()) {
        return;
      }
      next = l.pending.front();
    }
    OPENREG_WARN(rtEventSynchronize(next.work->end_));
    next.work->complete(*next.error);
    next.keep.clear();
    std::lock_guard<std::mutex> lock(l.mutex);
    l.pending.pop_front();
  }
}
// [/completion]

std::chrono::milliseconds ProcessGroupOCCL::effective(std::chrono::milliseconds requested) const {
  return requested == c10d::kUnsetTimeout ? timeout_ : requested;
}

void ProcessGroupOCCL::record_failure(const std::string& what) {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  if (!failed_.load()) {
    failure_ = what;
    failed_.store(true);
  }
}

void ProcessGroupOCCL::run_task(void* raw) {
  std::unique_ptr<Task> task(static_cast<Task*>(raw));
  try {
    if (task->group->failed_.load()) {
      std::lock_guard<std::mutex> lock(task->group->failure_mutex_);
      C10_THROW_ERROR(DistBackendError,
                      "occl: an earlier operation of this group failed: " + task->group->failure_);
    }
    task->body(*task->transport, Clock::now() + task->timeout);
  } catch (const std::exception& e) {
    *task->error = std::current_exception();
    task->group->record_failure(e.what());
  }
}

// [enqueue]
c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::enqueue(
    LaneId id, c10d::OpType type, const std::vector<at::Tensor>& tensors,
    std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout, Body body,
    bool host_blocking) {
  const auto device = bind_device(tensors);
  if (failed_.load()) {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    C10_THROW_ERROR(DistBackendError, "occl: an earlier operation of this group failed: " + failure_);
  }
  Lane& l = lane(id);
  auto work = c10::make_intrusive<WorkOCCL>(rank_, type, device, std::move(outputs), host_blocking);

  // The lane's stream starts once the caller's current stream has produced
  // the inputs (the event's mark is captured at once: destroying it is safe).
  rtEvent_t ready = nullptr;
  OPENREG_CHECK(rtEventCreateWithFlags(&ready, rtEventDisableTiming));
  OPENREG_CHECK(rtEventRecord(ready, openreg::getCurrentRawStream(device)));
  OPENREG_CHECK(rtStreamWaitEvent(l.stream, ready, 0));
  OPENREG_CHECK(rtEventDestroy(ready));

  // A kernel, not a host function: device memory is accessible while it runs.
  auto error = std::make_shared<std::exception_ptr>();
  auto* task = new Task{std::move(body), transport_.get(), effective(timeout), error, this};
  const rtError_t launched = rtLaunchKernel(l.stream, &ProcessGroupOCCL::run_task, task);
  if (launched != rtSuccess) {
    delete task;
    OPENREG_CHECK(launched);
  }
  OPENREG_CHECK(rtEventCreateWithFlags(&work->end_, rtEventDisableTiming));
  OPENREG_CHECK(rtEventRecord(work->end_, l.stream));
  {
    std::lock_guard<std::mutex> lock(l.mutex);
    l.pending.push_back({work, error, tensors});
  }
  l.cv.notify_one();
  ++sequence_;
  return work;
}
// [/enqueue]

// ---- collectives --------------------------------------------------------------

// [allreduce]
// Reduce-scatter then all-gather, both direct (every pair at once): rank i
// reduces share i from everyone in rank order and sends it back, so every
// rank ends with bitwise the same result.
c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::allreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  const auto& t = single(tensors, "all_reduce tensor");
  const auto kind = kind_of(opts.reduceOp);
  auto reduce = make_reduce(t.scalar_type(), kind);
  const int r = rank_;
  const int n = size_;
  char* base = bytes_of(t);
  const int64_t numel = t.numel();
  const size_t element = t.element_size();
  const auto dtype = t.scalar_type();
  return enqueue(LaneId::Collective, c10d::OpType::ALLREDUCE, tensors, tensors, opts.timeout,
                 [=](ShmTransport& tr, Clock::time_point deadline) {
    const Share own = share_of(numel, element, n, r);
    std::vector<SendSpec> sends;
    std::vector<RecvSpec> recvs;
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      const Share theirs = share_of(numel, element, n, p);
      sends.push_back({p, Channel::Collective, base + theirs.offset, theirs.bytes});
      recvs.push_back({p, Channel::Collective, base + own.offset, own.bytes, 0, reduce});
    }
    tr.run(sends, recvs, deadline);
    if (kind == ReduceKind::Avg) {
      divide_by(base + own.offset, own.bytes, dtype, n);
    }
    sends.clear();
    recvs.clear();
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      const Share theirs = share_of(numel, element, n, p);
      sends.push_back({p, Channel::Collective, base + own.offset, own.bytes});
      recvs.push_back({p, Channel::Collective, base + theirs.offset, theirs.bytes});
    }
    tr.run(sends, recvs, deadline);
  });
}
// [/allreduce]

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::broadcast(
    std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const auto& t = single(tensors, "broadcast tensor");
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, "occl: broadcast root ", root, " out of range");
  TORCH_CHECK(opts.rootTensor == 0, "occl: broadcast takes one tensor per rank");
  const int r = rank_;
  const int n = size_;
  char* data = bytes_of(t);
  const size_t bytes = nbytes(t);
  return enqueue(LaneId::Collective, c10d::OpType::BROADCAST, tensors, tensors, opts.timeout,
                 [=](ShmTransport& tr, Clock::time_point deadline) {
    std::vector<SendSpec> sends;
    std::vector<RecvSpec> recvs;
    if (r == root) {
      for (int p = 0; p < n; ++p) {
        if (p != r) sends.push_back({p, Channel::Collective, data, bytes});
      }
    } else {
      recvs.push_back({root, Channel::Collective, data, bytes});
    }
    tr.run(sends, recvs, deadline);
  });
}

namespace {

// all_gather of `bytes` per rank into `slots[i]` (one pointer per rank).
ProcessGroupOCCL::Body gather_body(int r, int n, const char* input, size_t bytes,
                                   std::vector<char*> slots);

} // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const auto& in = single(inputs, "all_gather input");
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
              "occl: all_gather needs one output list of ", size_, " tensors");
  std::vector<char*> slots;
  std::vector<at::Tensor> all = {in};
  for (const auto& o : outputs[0]) {
    check_tensor(o, "all_gather output");
    TORCH_CHECK(o.scalar_type() == in.scalar_type() && o.numel() == in.numel(),
                "occl: all_gather outputs must match the input's dtype and size");
    slots.push_back(bytes_of(o));
    all.push_back(o);
  }
  return enqueue(LaneId::Collective, c10d::OpType::ALLGATHER, all, outputs[0], opts.timeout,
                 gather_body(rank_, size_, bytes_of(in), nbytes(in), std::move(slots)));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  check_tensor(input, "all_gather_into_tensor input");
  check_tensor(output, "all_gather_into_tensor output");
  TORCH_CHECK(output.scalar_type() == input.scalar_type() && output.numel() == input.numel() * size_,
              "occl: all_gather_into_tensor output must hold world_size inputs of its dtype");
  std::vector<char*> slots;
  for (int p = 0; p < size_; ++p) {
    slots.push_back(bytes_of(output) + p * nbytes(input));
  }
  return enqueue(LaneId::Collective, c10d::OpType::_ALLGATHER_BASE, {input, output}, {output},
                 opts.timeout, gather_body(rank_, size_, bytes_of(input), nbytes(input), std::move(slots)));
}

namespace {

ProcessGroupOCCL::Body gather_body(int r, int n, const char* input, size_t bytes,
                                   std::vector<char*> slots) {
  return [=](ShmTransport& tr, Clock::time_point deadline) {
    if (slots[r] != input && bytes > 0) {
      std::memmove(slots[r], input, bytes);
    }
    std::vector<SendSpec> sends;
    std::vector<RecvSpec> recvs;
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      sends.push_back({p, Channel::Collective, slots[r], bytes});
      recvs.push_back({p, Channel::Collective, slots[p], bytes});
    }
    tr.run(sends, recvs, deadline);
  };
}

// reduce_scatter of n pieces of `bytes` (pieces[i] goes to rank i) into `out`.
ProcessGroupOCCL::Body scatter_body(int r, int n, std::vector<const char*> pieces, char* out,
                                    size_t bytes, ReduceFn reduce, ReduceKind kind,
                                    c10::ScalarType dtype) {
  return [=](ShmTransport& tr, Clock::time_point deadline) {
    if (bytes > 0 && out != pieces[r]) {
      std::memmove(out, pieces[r], bytes);
    }
    std::vector<SendSpec> sends;
    std::vector<RecvSpec> recvs;
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      sends.push_back({p, Channel::Collective, pieces[p], bytes});
      recvs.push_back({p, Channel::Collective, out, bytes, 0, reduce});
    }
    tr.run(sends, recvs, deadline);
    if (kind == ReduceKind::Avg) {
      divide_by(out, bytes, dtype, n);
    }
  };
}

} // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const auto& out = single(outputs, "reduce_scatter output");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
              "occl: reduce_scatter needs one input list of ", size_, " tensors");
  const auto kind = kind_of(opts.reduceOp);
  auto reduce = make_reduce(out.scalar_type(), kind);
  std::vector<const char*> pieces;
  std::vector<at::Tensor> all = {out};
  for (const auto& piece : inputs[0]) {
    check_tensor(piece, "reduce_scatter input");
    TORCH_CHECK(piece.scalar_type() == out.scalar_type() && piece.numel() == out.numel(),
                "occl: reduce_scatter inputs must match the output's dtype and size");
    pieces.push_back(bytes_of(piece));
    all.push_back(piece);
  }
  return enqueue(LaneId::Collective, c10d::OpType::REDUCE_SCATTER, all, outputs, opts.timeout,
                 scatter_body(rank_, size_, std::move(pieces), bytes_of(out), nbytes(out),
                              std::move(reduce), kind, out.scalar_type()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  check_tensor(input, "reduce_scatter_tensor input");
  check_tensor(output, "reduce_scatter_tensor output");
  TORCH_CHECK(input.scalar_type() == output.scalar_type() && input.numel() == output.numel() * size_,
              "occl: reduce_scatter_tensor input must hold world_size outputs of its dtype");
  const auto kind = kind_of(opts.reduceOp);
  auto reduce = make_reduce(output.scalar_type(), kind);
  std::vector<const char*> pieces;
  for (int p = 0; p < size_; ++p) {
    pieces.push_back(bytes_of(input) + p * nbytes(output));
  }
  return enqueue(LaneId::Collective, c10d::OpType::_REDUCE_SCATTER_BASE, {input, output}, {output},
                 opts.timeout,
                 scatter_body(rank_, size_, std::move(pieces), bytes_of(output), nbytes(output),
                              std::move(reduce), kind, output.scalar_type()));
}

// [p2p]
c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::send(std::vector<at::Tensor>& tensors, int dst,
                                                      int tag) {
  const auto& t = single(tensors, "send tensor");
  TORCH_CHECK(dst >= 0 && dst < size_ && dst != rank_, "occl: send to rank ", dst, " is invalid");
  const char* data = bytes_of(t);
  const size_t bytes = nbytes(t);
  const auto wire_tag = static_cast<uint32_t>(tag);
  return enqueue(LaneId::Send, c10d::OpType::SEND, tensors, {}, c10d::kUnsetTimeout,
                 [=](ShmTransport& tr, Clock::time_point deadline) {
    tr.run({{dst, Channel::P2P, data, bytes, wire_tag}}, {}, deadline);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::recv(std::vector<at::Tensor>& tensors, int src,
                                                      int tag) {
  const auto& t = single(tensors, "recv tensor");
  TORCH_CHECK(src >= 0 && src < size_ && src != rank_, "occl: recv from rank ", src, " is invalid");
  char* data = bytes_of(t);
  const size_t bytes = nbytes(t);
  const auto wire_tag = static_cast<uint32_t>(tag);
  return enqueue(LaneId::Recv, c10d::OpType::RECV, tensors, tensors, c10d::kUnsetTimeout,
                 [=](ShmTransport& tr, Clock::time_point deadline) {
    tr.run({}, {{src, Channel::P2P, data, bytes, wire_tag}}, deadline);
  });
}
// [/p2p]

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::barrier(const c10d::BarrierOptions& opts) {
  if (opts.device.has_value() && opts.device->type() == c10::DeviceType::PrivateUse1 &&
      device_ < 0 && opts.device->has_index()) {
    std::lock_guard<std::mutex> lock(lanes_mutex_);
    device_ = opts.device->index();
  }
  const int r = rank_;
  const int n = size_;
  // An empty message to and from every peer; wait() blocks the host.
  return enqueue(LaneId::Collective, c10d::OpType::BARRIER, {}, {}, opts.timeout,
                 [=](ShmTransport& tr, Clock::time_point deadline) {
    std::vector<SendSpec> sends;
    std::vector<RecvSpec> recvs;
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      sends.push_back({p, Channel::Collective, nullptr, 0});
      recvs.push_back({p, Channel::Collective, nullptr, 0});
    }
    tr.run(sends, recvs, deadline);
  }, /*host_blocking=*/true);
}

c10::intrusive_ptr<ProcessGroupOCCL> create_process_group_occl(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout) {
  return c10::make_intrusive<ProcessGroupOCCL>(store, rank, size, timeout);
}

} // namespace openreg::distributed
