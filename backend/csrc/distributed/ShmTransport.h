// Shared-memory transport between the processes of one occl group.
//
// Every rank owns one POSIX shared-memory segment holding its *inbound*
// rings, one per (peer, channel); a producer writes into the consumer's
// segment and the consumer reads in place, so a message costs one copy in and
// one copy (or reduction) out. A ring is a fixed array of slots; a message of
// N bytes takes max(1, ceil(N / slot_bytes)) slots, so every piece but the
// last is a whole number of elements of any dtype, and reductions can read
// straight from the slot.
//
// Waiting never polls for long: each rank has a doorbell word in its segment
// that producers and consumers bump after publishing or freeing slots; an
// idle side sleeps on it with futex(2) (shared, not private: the word lives
// in memory mapped by several processes).
//
// Header only depends on the standard library: ProcessGroupOCCL wraps it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace openreg::distributed {

// Channels are independent rings per pair: collectives run on one device
// stream, point-to-point sends and receives on two others, and each ring has
// exactly one producer and one consumer thread.
enum class Channel : int { Collective = 0, P2P = 1 };
constexpr int kChannels = 2;

struct TransportConfig {
  size_t slots = 16;
  size_t slot_bytes = 256 * 1024;
};

// Reduces `count` elements of src into dst (dst = dst op src).
using ReduceFn = std::function<void(void* dst, const void* src, size_t bytes)>;

struct SendSpec {
  int peer;
  Channel channel;
  const void* data;
  size_t bytes;
  uint32_t tag = 0;
};

struct RecvSpec {
  int peer;
  Channel channel;
  void* data;
  size_t bytes;
  uint32_t tag = 0;
  ReduceFn reduce;  // empty: copy
};

class ShmTransport {
 public:
  // Creates this rank's segment, named `<prefix>.<rank>`; open_peers() maps
  // the others once they exist (the caller rendezvouses in between).
  ShmTransport(int rank, int size, std::string prefix, TransportConfig config = {});
  ~ShmTransport();
  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  void open_peers();
  // Removes this rank's name from /dev/shm once every peer has mapped it:
  // the mappings stay valid and nothing is left behind if a process dies.
  void unlink_own();

  // Moves every send and receive to completion, interleaved slot by slot so
  // that rings never deadlock. Receives are taken in the order given (a
  // deterministic reduction order); sends progress concurrently.
  // Throws c10::DistBackendError on timeout, a dead peer or abort().
  void run(std::vector<SendSpec> sends, std::vector<RecvSpec> recvs,
           std::chrono::steady_clock::time_point deadline);

  // Wakes every waiter of this process and makes run() fail from now on.
  void abort();

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  struct Segment;
  struct Ring;

  Ring ring(int owner, int src, Channel channel) const;
  void ring_doorbell(int rank);
  void wait_doorbell(uint32_t seen, std::chrono::steady_clock::time_point deadline);
  void check_peers_alive() const;
  std::string name_of(int rank) const { return prefix_ + "." + std::to_string(rank); }

  int rank_;
  int size_;
  TransportConfig config_;
  size_t ring_bytes_ = 0;
  size_t segment_bytes_ = 0;
  std::string prefix_;
  std::vector<Segment*> segments_;  // [rank], mapped
  std::atomic<bool> aborted_{false};
  bool unlinked_ = false;
};

} // namespace openreg::distributed
