// Process-wide runtime state: device arenas, the access gate, pinned host memory,
// and the registries that turn C handles back into objects.
//
// The runtime is created on first use and never destroyed: worker threads and
// static destructors of the embedding program may still call in while the process
// exits. At exit it only stops the streams (see shut_down()).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <new>
#include <shared_mutex>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "access_gate.h"
#include "arena.h"
#include "config.h"
#include "event.h"
#include "host_registry.h"
#include "openreg.h"
#include "stream.h"

namespace openreg {

using StreamPtr = std::shared_ptr<orStream_st>;

class Runtime {
 public:
  // Creates the runtime on first use. C entry points go through api_call().
  static Runtime& get();

  int device_count() const { return static_cast<int>(arenas_.size()); }
  bool valid_device(int d) const { return d >= 0 && d < device_count(); }
  Arena& arena(int d) { return *arenas_[static_cast<std::size_t>(d)]; }
  AccessGate& gate() { return gate_; }
  HostRegistry& host() { return host_; }

  // Device index whose arena holds `ptr`, or -1.
  int device_of(const void* ptr) const;
  orPointerAttributes attributes(const void* ptr) const;

  // Streams. `handle` NULL means the current device's default stream.
  orError_t resolve(orStream_t handle, StreamPtr* out);
  orError_t default_stream(int device, StreamPtr* out);
  // The default stream only if it already exists (it has no work otherwise).
  StreamPtr existing_default_stream(int device) const;
  orError_t create_stream(int device, int priority, StreamPtr* out);
  orError_t destroy_stream(orStream_t handle);
  std::vector<StreamPtr> streams_on(int device) const;  // every device if device < 0

  // Events.
  orEvent_st* create_event(unsigned flags);
  bool known_event(orEvent_t event) const;
  bool destroy_event(orEvent_t event);

  bool unloading() const { return unloading_.load(std::memory_order_acquire); }

 private:
  Runtime();
  void register_stream(const StreamPtr& s);
  void shut_down();  // atexit

  std::vector<std::unique_ptr<Arena>> arenas_;
  AccessGate gate_;
  HostRegistry host_;

  mutable std::shared_mutex streams_mu_;
  std::unordered_map<const orStream_st*, StreamPtr> streams_;
  // Every stream ever started, including destroyed ones still draining, so that exit
  // can stop them all.
  std::vector<std::weak_ptr<orStream_st>> workers_;
  std::vector<StreamPtr> defaults_;  // written once per device under streams_mu_
  std::unique_ptr<std::atomic<orStream_st*>[]> default_ready_;

  mutable std::mutex events_mu_;
  std::unordered_set<const orEvent_st*> events_;

  std::atomic<bool> unloading_{false};
};

// True in a child forked after the runtime was initialised: its locks may be held by
// threads that no longer exist, so it must not be touched.
bool forked_after_init();

// The body of every C entry point that touches runtime state. Refuses in a poisoned
// fork child, creates the runtime on first use, and turns C++ exceptions (which must
// not cross the C boundary) into error codes.
template <typename Body>
orError_t api_call(Body&& body) noexcept {
  if (forked_after_init()) return orErrorInitializationError;
  try {
    Runtime::get();
    return body();
  } catch (const std::bad_alloc&) {
    return orErrorMemoryAllocation;
  } catch (const std::system_error&) {
    return orErrorMemoryAllocation;  // a worker thread could not be started
  } catch (...) {
    return orErrorUnknown;
  }
}

enum class SyncKind {
  // A synchronisation the caller asked for: it reports (and clears) failures of the
  // streams' work; from a stream's own worker it is refused with orErrorNotPermitted.
  Explicit,
  // A side effect of another call (orFree, orMemcpy): failures stay for the next
  // explicit sync, and a worker simply does not wait for its own stream.
  Implicit,
};

orError_t wait_streams(const std::vector<StreamPtr>& streams, SyncKind kind);

}  // namespace openreg
