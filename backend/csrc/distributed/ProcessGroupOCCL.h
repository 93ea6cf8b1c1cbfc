// occl: the c10d backend of openreg tensors ("OpenReg Collective
// Communication Library", in the role NCCL plays for CUDA).
//
// Each collective is a device kernel on a communication stream of its own:
// the stream first waits for the caller's current stream (inputs ready), the
// kernel moves data through ShmTransport, and an event recorded after it is
// what the Work waits on. So a call returns at once, Work::wait() only makes
// the caller's current stream wait for that event (like ProcessGroupNCCL),
// and the host blocks only in barrier() or when it reads the data.
//
// Lanes: collectives, sends and receives run on three streams, so that a
// rank may send and receive at the same time (send-then-recv on both sides
// does not deadlock). Within a lane, operations run in issue order, and
// messages between two ranks match in that order (tags are checked, not
// searched: a mismatch is an error, as a size mismatch is).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "runtime/rt/Runtime.h"

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "distributed/ShmTransport.h"

namespace openreg::distributed {

class WorkOCCL : public c10d::Work {
 public:
  WorkOCCL(int rank, c10d::OpType type, c10::DeviceIndex device,
           std::vector<at::Tensor> outputs, bool host_blocking);
  ~WorkOCCL() override;

  // Makes the current stream wait for the collective; blocks the host only
  // for barrier(). Rethrows the collective's error if it already failed.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override;

  // Called by the lane's completion thread once the end event was reached.
  void complete(std::exception_ptr error);

 private:
  friend class ProcessGroupOCCL;
  c10::DeviceIndex device_;
  rtEvent_t end_ = nullptr;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool host_blocking_;
};

class ProcessGroupOCCL : public c10d::Backend {
 public:
  ProcessGroupOCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout);
  ~ProcessGroupOCCL() override;

  const std::string getBackendName() const override { return "occl"; }

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return sequence_; }

  // What a lane's kernel runs: the transfers of one operation.
  using Body = std::function<void(ShmTransport&, std::chrono::steady_clock::time_point)>;

 private:
  struct Task;
  static void run_task(void* task);  // the device kernel
  enum class LaneId { Collective = 0, Send = 1, Recv = 2 };
  struct Pending {
    c10::intrusive_ptr<WorkOCCL> work;
    std::shared_ptr<std::exception_ptr> error;
    std::vector<at::Tensor> keep;  // inputs and outputs, alive until the kernel ran
  };
  struct Lane {
    rtStream_t stream = nullptr;
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<Pending> pending;
    std::thread completer;
  };
  c10::intrusive_ptr<c10d::Work> enqueue(
      LaneId lane, c10d::OpType type, const std::vector<at::Tensor>& tensors,
      std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout, Body body,
      bool host_blocking = false);
  c10::DeviceIndex bind_device(const std::vector<at::Tensor>& tensors);
  Lane& lane(LaneId id);
  void complete_loop(Lane& lane);
  std::chrono::milliseconds effective(std::chrono::milliseconds requested) const;
  void record_failure(const std::string& what);

  std::chrono::milliseconds timeout_;
  std::unique_ptr<ShmTransport> transport_;
  std::mutex lanes_mutex_;
  std::array<std::unique_ptr<Lane>, 3> lanes_;
  c10::DeviceIndex device_ = -1;
  std::atomic<bool> stopping_{false};
  uint64_t sequence_ = 0;
  // The first collective that failed: the rings' state is unknown after it,
  // so every later operation fails fast with this message (as NCCL's async
  // error handling tears the communicator down).
  std::mutex failure_mutex_;
  std::string failure_;
  std::atomic<bool> failed_{false};
};

// The creator behind torch.distributed.Backend.register_backend("occl", ...).
c10::intrusive_ptr<ProcessGroupOCCL> create_process_group_occl(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout);

} // namespace openreg::distributed
