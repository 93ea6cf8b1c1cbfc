// libshmreg: streams, events, kernels and copies. All of it runs in the
// client: a stream is a worker thread draining its queue in order, a kernel is
// a host function run there on the mapped device memory. Only memsets leave
// the process (the server performs them).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <algorithm>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "client.h"

namespace {

using Seq = std::uint64_t;
constexpr int kLeastPriority = 0;
constexpr int kGreatestPriority = -1;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct shmStream_st {
  shmStream_st(int device_, int priority_, std::uint64_t id_)
      : device(device_), priority(priority_), id(id_) {
    std::thread t([this] { run(); });
    worker = t.get_id();
    t.detach();
  }

  Seq enqueue(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu);
    queue.push_back(std::move(fn));
    const Seq s = ++enqueued;
    work_cv.notify_one();
    return s;
  }
  bool done(Seq s) const { return completed.load(std::memory_order_acquire) >= s; }
  void wait(Seq s) {
    std::unique_lock<std::mutex> lock(mu);
    done_cv.wait(lock, [&] { return done(s); });
  }
  bool on_worker() const { return std::this_thread::get_id() == worker; }
  shmError_t take_error() {
    std::lock_guard<std::mutex> lock(mu);
    return std::exchange(error, shmSuccess);
  }
  void fail(shmError_t e) {
    std::lock_guard<std::mutex> lock(mu);
    if (error == shmSuccess) error = e;
  }
  // The worker exits once the queue is empty. The struct itself is never
  // freed: a host thread may still be returning from wait() on it, and a
  // destroyed stream costs a few hundred bytes.
  void close() {
    std::lock_guard<std::mutex> lock(mu);
    closing = true;
    work_cv.notify_one();
  }

  const int device;
  const int priority;
  const std::uint64_t id;
  std::mutex mu;
  std::condition_variable work_cv, done_cv;
  std::deque<std::function<void()>> queue;
  Seq enqueued = 0;  // guarded by mu
  std::atomic<Seq> completed{0};
  shmError_t error = shmSuccess;
  bool closing = false;
  std::thread::id worker;

 private:
  void run() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu);
        work_cv.wait(lock, [&] { return !queue.empty() || closing; });
        if (queue.empty()) break;
        fn = std::move(queue.front());
        queue.pop_front();
      }
      fn();
      {
        std::lock_guard<std::mutex> lock(mu);
        completed.fetch_add(1, std::memory_order_release);
      }
      done_cv.notify_all();
    }
  }
};

// One record of an event: which stream position, and when it was reached.
struct Mark {
  shmStream_st* stream = nullptr;  // valid while the stream is registered
  Seq seq = 0;
  std::shared_ptr<std::atomic<std::int64_t>> reached_ns;
};

struct shmEvent_st {
  explicit shmEvent_st(bool timing_) : timing(timing_) {}
  const bool timing;
  std::mutex mu;
  Mark mark;  // seq 0: never recorded
};

namespace {

// Live streams and events, so handles can be validated and the device synchronized.
struct Registry {
  std::mutex mu;
  std::set<shmStream_st*> streams;
  std::set<shmEvent_st*> events;
  std::vector<shmStream_st*> defaults;  // per device, created on first use
  std::uint64_t next_id = 1;
};

Registry& registry() {
  static auto* r = new Registry;  // never destroyed: workers outlive exit-time destructors
  return *r;
}

shmError_t default_stream(int device, shmStream_st** out) {
  shmreg::Client* c = nullptr;
  if (shmError_t e = shmreg::Client::get(&c); e != shmSuccess) return e;
  if (device < 0 || device >= c->device_count()) return shmErrorInvalidDevice;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.defaults.empty()) r.defaults.assign(c->device_count(), nullptr);
  if (r.defaults[device] == nullptr) {
    auto* s = new shmStream_st(device, kLeastPriority, r.next_id++);
    r.streams.insert(s);
    r.defaults[device] = s;
  }
  *out = r.defaults[device];
  return shmSuccess;
}

// A null handle is the current device's default stream.
shmError_t resolve(shmStream_t stream, shmStream_st** out) {
  if (stream == nullptr) return default_stream(shmreg::current_device(), out);
  shmreg::Client* c = nullptr;
  if (shmError_t e = shmreg::Client::get(&c); e != shmSuccess) return e;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.streams.count(stream) == 0) return shmErrorInvalidResourceHandle;
  *out = stream;
  return shmSuccess;
}

shmError_t valid_event(shmEvent_t event) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.events.count(event) != 0 ? shmSuccess : shmErrorInvalidResourceHandle;
}

shmError_t sync_stream(shmStream_st* s) {
  if (s->on_worker()) return shmErrorNotPermitted;
  Seq last;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    last = s->enqueued;
  }
  s->wait(last);
  return s->take_error();
}

shmError_t memset_on_server(void* dev_ptr, int value, size_t count) {
  shmreg::Client* c = nullptr;
  if (shmError_t e = shmreg::Client::get(&c); e != shmSuccess) return e;
  if (c->device_of(dev_ptr) < 0) return shmErrorInvalidDevicePointer;
  shmreg::Reply r{};
  return c->call({shmreg::Op::Memset, 0, c->offset_of(dev_ptr), static_cast<std::uint64_t>(value) & 0xff,
                  count},
                 &r);
}

}  // namespace

extern "C" {

shmError_t shmDeviceGetDefaultStream(int device, shmStream_t* stream) {
  if (stream == nullptr) return shmErrorInvalidValue;
  return default_stream(device, stream);
}

shmError_t shmStreamCreate(shmStream_t* stream, int priority) {
  if (stream == nullptr) return shmErrorInvalidValue;
  shmreg::Client* c = nullptr;
  if (shmError_t e = shmreg::Client::get(&c); e != shmSuccess) return e;
  priority = std::min(kLeastPriority, std::max(kGreatestPriority, priority));
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto* s = new shmStream_st(shmreg::current_device(), priority, r.next_id++);
  r.streams.insert(s);
  *stream = s;
  return shmSuccess;
}

shmError_t shmStreamDestroy(shmStream_t stream) {
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (stream == nullptr || r.streams.count(stream) == 0) return shmErrorInvalidResourceHandle;
    for (shmStream_st* d : r.defaults) {
      if (d == stream) return shmErrorInvalidResourceHandle;  // default streams live forever
    }
    r.streams.erase(stream);
  }
  stream->close();  // queued work still runs, as in CUDA
  return shmSuccess;
}

shmError_t shmStreamSynchronize(shmStream_t stream) {
  shmStream_st* s = nullptr;
  if (shmError_t e = resolve(stream, &s); e != shmSuccess) return e;
  return sync_stream(s);
}

shmError_t shmStreamQuery(shmStream_t stream) {
  shmStream_st* s = nullptr;
  if (shmError_t e = resolve(stream, &s); e != shmSuccess) return e;
  std::lock_guard<std::mutex> lock(s->mu);
  return s->done(s->enqueued) ? shmSuccess : shmErrorNotReady;
}

shmError_t shmStreamGetPriority(shmStream_t stream, int* priority) {
  if (priority == nullptr) return shmErrorInvalidValue;
  shmStream_st* s = nullptr;
  if (shmError_t e = resolve(stream, &s); e != shmSuccess) return e;
  *priority = s->priority;
  return shmSuccess;
}

shmError_t shmStreamGetDevice(shmStream_t stream, int* device) {
  if (device == nullptr) return shmErrorInvalidValue;
  shmStream_st* s = nullptr;
  if (shmError_t e = resolve(stream, &s); e != shmSuccess) return e;
  *device = s->device;
  return shmSuccess;
}

shmError_t shmStreamGetId(shmStream_t stream, unsigned long long* id) {
  if (id == nullptr) return shmErrorInvalidValue;
  shmStream_st* s = nullptr;
  if (shmError_t e = resolve(stream, &s); e != shmSuccess) return e;
  *id = s->id;
  return shmSuccess;
}

shmError_t shmLaunch(shmStream_t stream, shmHostFn_t fn, void* user_data) {
  if (fn == nullptr) return shmErrorInvalidValue;
  shmStream_st* s = nullptr;
  if (shmError_t e = resolve(stream, &s); e != shmSuccess) return e;
  s->enqueue([fn, user_data] { fn(user_data); });
  return shmSuccess;
}

shmError_t shmDeviceSynchronize(void) {
  shmStream_st* dflt = nullptr;
  if (shmError_t e = default_stream(shmreg::current_device(), &dflt); e != shmSuccess) return e;
  std::vector<shmStream_st*> mine;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (shmStream_st* s : r.streams) {
      if (s->device == dflt->device) mine.push_back(s);
    }
  }
  shmError_t first = shmSuccess;
  for (shmStream_st* s : mine) {
    // A stream destroyed meanwhile may be freed: only registered ones are waited for.
    if (resolve(s, &s) != shmSuccess) continue;
    shmError_t e = sync_stream(s);
    if (first == shmSuccess) first = e;
  }
  return first;
}

shmError_t shmMemcpy(void* dst, const void* src, size_t count) {
  if (count == 0) return shmSuccess;
  if (dst == nullptr || src == nullptr) return shmErrorInvalidValue;
  shmreg::Client* c = nullptr;
  if (shmError_t e = shmreg::Client::get(&c); e != shmSuccess) return e;
  for (int d : {c->device_of(dst), c->device_of(src)}) {
    shmStream_st* s = nullptr;
    if (d >= 0 && default_stream(d, &s) == shmSuccess) {
      if (shmError_t e = sync_stream(s); e != shmSuccess) return e;
    }
  }
  std::memmove(dst, src, count);
  return shmSuccess;
}

shmError_t shmMemcpyAsync(void* dst, const void* src, size_t count, shmStream_t stream) {
  if (count == 0) return shmSuccess;
  if (dst == nullptr || src == nullptr) return shmErrorInvalidValue;
  shmStream_st* s = nullptr;
  if (shmError_t e = resolve(stream, &s); e != shmSuccess) return e;
  s->enqueue([dst, src, count] { std::memmove(dst, src, count); });
  return shmSuccess;
}

shmError_t shmMemset(void* dev_ptr, int value, size_t count) {
  if (count == 0) return shmSuccess;
  shmStream_st* s = nullptr;
  if (shmError_t e = resolve(nullptr, &s); e != shmSuccess) return e;
  if (shmError_t e = sync_stream(s); e != shmSuccess) return e;
  return memset_on_server(dev_ptr, value, count);
}

shmError_t shmMemsetAsync(void* dev_ptr, int value, size_t count, shmStream_t stream) {
  if (count == 0) return shmSuccess;
  shmStream_st* s = nullptr;
  if (shmError_t e = resolve(stream, &s); e != shmSuccess) return e;
  s->enqueue([s, dev_ptr, value, count] {
    if (shmError_t e = memset_on_server(dev_ptr, value, count); e != shmSuccess) s->fail(e);
  });
  return shmSuccess;
}

shmError_t shmEventCreate(shmEvent_t* event, int timing) {
  if (event == nullptr) return shmErrorInvalidValue;
  auto* e = new shmEvent_st(timing != 0);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.events.insert(e);
  *event = e;
  return shmSuccess;
}

shmError_t shmEventDestroy(shmEvent_t event) {
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.events.erase(event) == 0) return shmErrorInvalidResourceHandle;
  }
  delete event;  // a marker in flight holds only its own shared timestamp
  return shmSuccess;
}

shmError_t shmEventRecord(shmEvent_t event, shmStream_t stream) {
  if (shmError_t e = valid_event(event); e != shmSuccess) return e;
  shmStream_st* s = nullptr;
  if (shmError_t e = resolve(stream, &s); e != shmSuccess) return e;
  auto reached = std::make_shared<std::atomic<std::int64_t>>(0);
  const Seq seq = s->enqueue([reached] { reached->store(now_ns()); });
  std::lock_guard<std::mutex> lock(event->mu);
  event->mark = Mark{s, seq, reached};
  return shmSuccess;
}

namespace {
Mark mark_of(shmEvent_t event) {
  std::lock_guard<std::mutex> lock(event->mu);
  return event->mark;
}
}  // namespace

shmError_t shmEventQuery(shmEvent_t event) {
  if (shmError_t e = valid_event(event); e != shmSuccess) return e;
  const Mark m = mark_of(event);
  if (m.seq == 0) return shmSuccess;  // never recorded: complete, as in CUDA
  return m.reached_ns->load() != 0 ? shmSuccess : shmErrorNotReady;
}

shmError_t shmEventSynchronize(shmEvent_t event) {
  if (shmError_t e = valid_event(event); e != shmSuccess) return e;
  const Mark m = mark_of(event);
  if (m.seq == 0 || m.reached_ns->load() != 0) return shmSuccess;
  shmStream_st* s = nullptr;
  if (resolve(m.stream, &s) != shmSuccess) {
    // The stream was destroyed; its worker still drains the marker.
    while (m.reached_ns->load() == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    return shmSuccess;
  }
  if (s->on_worker()) return shmErrorNotPermitted;
  s->wait(m.seq);
  return shmSuccess;
}

shmError_t shmStreamWaitEvent(shmStream_t stream, shmEvent_t event) {
  if (shmError_t e = valid_event(event); e != shmSuccess) return e;
  shmStream_st* s = nullptr;
  if (shmError_t e = resolve(stream, &s); e != shmSuccess) return e;
  const Mark m = mark_of(event);
  if (m.seq == 0 || m.reached_ns->load() != 0) return shmSuccess;
  auto reached = m.reached_ns;
  shmStream_st* other = m.stream;
  if (other == s) return shmSuccess;  // same stream: already ordered
  // The waiting stream's worker blocks until the marker ran on the other one.
  s->enqueue([reached, other, seq = m.seq] {
    shmStream_st* live = nullptr;
    if (resolve(other, &live) == shmSuccess) {
      live->wait(seq);
    } else {
      while (reached->load() == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  return shmSuccess;
}

shmError_t shmEventElapsedTime(float* ms, shmEvent_t start, shmEvent_t end) {
  if (ms == nullptr) return shmErrorInvalidValue;
  for (shmEvent_t e : {start, end}) {
    if (shmError_t err = valid_event(e); err != shmSuccess) return err;
    if (!e->timing) return shmErrorInvalidResourceHandle;
  }
  const Mark a = mark_of(start), b = mark_of(end);
  if (a.seq == 0 || b.seq == 0) return shmErrorInvalidResourceHandle;
  const std::int64_t ta = a.reached_ns->load(), tb = b.reached_ns->load();
  if (ta == 0 || tb == 0) return shmErrorNotReady;
  *ms = static_cast<float>(tb - ta) / 1e6f;
  return shmSuccess;
}

}  // extern "C"
