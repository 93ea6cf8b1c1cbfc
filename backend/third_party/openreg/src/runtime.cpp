#include "runtime.h"

#include <pthread.h>

#include <chrono>
#include <cstdlib>

#include "thread_state.h"

namespace openreg {
namespace {

// Set in the child of a fork() that happened after the runtime existed.
std::atomic<bool> g_forked_after_init{false};

void mark_forked_child() { g_forked_after_init.store(true, std::memory_order_relaxed); }

std::vector<Arena*> raw(const std::vector<std::unique_ptr<Arena>>& arenas) {
  std::vector<Arena*> out;
  for (const auto& a : arenas) out.push_back(a.get());
  return out;
}

std::vector<std::unique_ptr<Arena>> make_arenas(const Config& cfg) {
  std::vector<std::unique_ptr<Arena>> arenas;
  for (int d = 0; d < cfg.device_count; ++d) {
    arenas.push_back(std::make_unique<Arena>(cfg.device_memory));
  }
  return arenas;
}

}  // namespace

int& current_device() {
  thread_local int device = 0;
  return device;
}

Runtime::Runtime()
    : arenas_(make_arenas(config())),
      gate_(raw(arenas_)),
      defaults_(arenas_.size()),
      default_ready_(new std::atomic<orStream_st*>[arenas_.size()]) {
  for (std::size_t d = 0; d < arenas_.size(); ++d) default_ready_[d].store(nullptr);
  pthread_atfork(nullptr, nullptr, &mark_forked_child);
  std::atexit([] { Runtime::get().shut_down(); });
}

Runtime& Runtime::get() {
  static Runtime* runtime = new Runtime();  // never destroyed, see runtime.h
  return *runtime;
}

bool forked_after_init() { return g_forked_after_init.load(std::memory_order_relaxed); }

int Runtime::device_of(const void* ptr) const {
  for (std::size_t d = 0; d < arenas_.size(); ++d) {
    if (arenas_[d]->contains(ptr)) return static_cast<int>(d);
  }
  return -1;
}

orPointerAttributes Runtime::attributes(const void* ptr) const {
  orPointerAttributes a{orMemoryTypeUnregistered, -1, const_cast<void*>(ptr), nullptr, 0};
  const int d = device_of(ptr);
  if (d >= 0) {
    a.type = orMemoryTypeDevice;
    a.device = d;
    if (auto block = arenas_[static_cast<std::size_t>(d)]->find(ptr)) {
      a.base = block->base;
      a.size = block->size;
    }
  } else if (auto block = host_.find(ptr)) {
    a.type = orMemoryTypeHost;
    a.base = block->base;
    a.size = block->size;
  }
  return a;
}

void Runtime::register_stream(const StreamPtr& s) {
  streams_.emplace(s.get(), s);
  std::erase_if(workers_, [](const auto& w) { return w.expired(); });
  workers_.push_back(s);
}

orError_t Runtime::default_stream(int device, StreamPtr* out) {
  if (!valid_device(device)) return orErrorInvalidDevice;
  const auto d = static_cast<std::size_t>(device);
  if (default_ready_[d].load(std::memory_order_acquire) != nullptr) {
    *out = defaults_[d];
    return orSuccess;
  }
  std::unique_lock lock(streams_mu_);
  if (!defaults_[d]) {
    if (unloading()) return orErrorRuntimeUnloading;
    defaults_[d] = orStream_st::start(device, 0, /*is_default=*/true, gate_);
    register_stream(defaults_[d]);
    default_ready_[d].store(defaults_[d].get(), std::memory_order_release);
  }
  *out = defaults_[d];
  return orSuccess;
}

StreamPtr Runtime::existing_default_stream(int device) const {
  if (!valid_device(device)) return nullptr;
  const auto d = static_cast<std::size_t>(device);
  if (default_ready_[d].load(std::memory_order_acquire) == nullptr) return nullptr;
  return defaults_[d];
}

orError_t Runtime::resolve(orStream_t handle, StreamPtr* out) {
  if (handle == nullptr) return default_stream(current_device(), out);
  std::shared_lock lock(streams_mu_);
  auto it = streams_.find(handle);
  if (it == streams_.end()) return orErrorInvalidResourceHandle;
  *out = it->second;
  return orSuccess;
}

orError_t Runtime::create_stream(int device, int priority, StreamPtr* out) {
  if (!valid_device(device)) return orErrorInvalidDevice;
  std::unique_lock lock(streams_mu_);
  if (unloading()) return orErrorRuntimeUnloading;
  *out = orStream_st::start(device, priority, /*is_default=*/false, gate_);
  register_stream(*out);
  return orSuccess;
}

orError_t Runtime::destroy_stream(orStream_t handle) {
  StreamPtr s;
  {
    std::unique_lock lock(streams_mu_);
    auto it = streams_.find(handle);
    if (it == streams_.end() || it->second->is_default) return orErrorInvalidResourceHandle;
    s = std::move(it->second);
    streams_.erase(it);
  }
  s->close();
  return orSuccess;
}

std::vector<StreamPtr> Runtime::streams_on(int device) const {
  std::vector<StreamPtr> out;
  std::shared_lock lock(streams_mu_);
  for (const auto& [handle, s] : streams_) {
    if (device < 0 || s->device == device) out.push_back(s);
  }
  return out;
}

orEvent_st* Runtime::create_event(unsigned flags) {
  auto e = std::make_unique<orEvent_st>(flags);
  std::lock_guard<std::mutex> lock(events_mu_);
  events_.insert(e.get());
  return e.release();  // owned by the registry until orEventDestroy
}

bool Runtime::known_event(orEvent_t event) const {
  std::lock_guard<std::mutex> lock(events_mu_);
  return events_.count(event) != 0;
}

bool Runtime::destroy_event(orEvent_t event) {
  {
    std::lock_guard<std::mutex> lock(events_mu_);
    if (events_.erase(event) == 0) return false;
  }
  // A marker still queued holds its own reference to the Record, not to the event.
  delete event;
  return true;
}

void Runtime::shut_down() {
  // In a forked child the workers do not exist and their locks may be held forever.
  if (g_forked_after_init.load(std::memory_order_relaxed)) return;
  std::vector<StreamPtr> live;
  {
    std::unique_lock lock(streams_mu_);
    unloading_.store(true, std::memory_order_release);
    for (const auto& w : workers_) {
      if (auto s = w.lock()) live.push_back(std::move(s));
    }
  }
  for (const auto& s : live) s->abandon();
  // Bounded: a kernel that never returns must not turn exit into a hang. Whatever is
  // still running after this is cut off by the process exiting.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (const auto& s : live) {
    if (!s->on_worker_thread()) s->wait_exited(deadline);
  }
}

orError_t wait_streams(const std::vector<StreamPtr>& streams, SyncKind kind) {
  if (kind == SyncKind::Explicit) {
    for (const auto& s : streams) {
      if (s && s->on_worker_thread()) return orErrorNotPermitted;
    }
  }
  orError_t first = orSuccess;
  for (const auto& s : streams) {
    if (!s || s->on_worker_thread()) continue;
    s->wait(s->last_enqueued());
    if (kind == SyncKind::Explicit) {
      const orError_t e = s->take_error();
      if (first == orSuccess) first = e;
    }
  }
  return first;
}

}  // namespace openreg
