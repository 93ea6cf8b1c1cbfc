// C entry points: events.
#include <chrono>

#include "event.h"
#include "openreg.h"
#include "runtime.h"

using namespace openreg;

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

orError_t known(orEvent_t event) {
  if (event == nullptr || !Runtime::get().known_event(event)) return orErrorInvalidResourceHandle;
  return orSuccess;
}

}  // namespace

extern "C" {

orError_t orEventCreate(orEvent_t* event) {
  return orEventCreateWithFlags(event, orEventDefault);
}

orError_t orEventCreateWithFlags(orEvent_t* event, unsigned int flags) {
  return api_call([&]() -> orError_t {
    if (event == nullptr || (flags & ~orEventDisableTiming) != 0) return orErrorInvalidValue;
    *event = Runtime::get().create_event(flags);
    return orSuccess;
  });
}

orError_t orEventDestroy(orEvent_t event) {
  return api_call([&]() -> orError_t {
    return Runtime::get().destroy_event(event) ? orSuccess : orErrorInvalidResourceHandle;
  });
}

orError_t orEventRecord(orEvent_t event, orStream_t stream) {
  return api_call([&]() -> orError_t {
    if (auto e = known(event); e != orSuccess) return e;
    StreamPtr s;
    if (auto e = Runtime::get().resolve(stream, &s); e != orSuccess) return e;
    auto record = std::make_shared<Record>();
    record->stream = s;
    // Holding the event's lock across enqueue keeps the stored record and its sequence
    // number consistent for concurrent readers; the worker never takes this lock.
    std::lock_guard<std::mutex> lock(event->mu);
    record->seq = s->enqueue({[record] { record->reached_ns.store(now_ns()); }, false});
    if (record->seq == 0) return orErrorRuntimeUnloading;
    event->record = std::move(record);
    return orSuccess;
  });
}

orError_t orEventQuery(orEvent_t event) {
  return api_call([&]() -> orError_t {
    if (auto e = known(event); e != orSuccess) return e;
    auto record = event->last_record();
    return (!record || record->done()) ? orSuccess : orErrorNotReady;
  });
}

orError_t orEventSynchronize(orEvent_t event) {
  return api_call([&]() -> orError_t {
    if (auto e = known(event); e != orSuccess) return e;
    auto record = event->last_record();
    if (!record || record->done()) return orSuccess;
    if (record->stream->on_worker_thread()) return orErrorNotPermitted;
    record->stream->wait(record->seq);
    return orSuccess;
  });
}

orError_t orEventElapsedTime(float* ms, orEvent_t start, orEvent_t end) {
  return api_call([&]() -> orError_t {
    if (ms == nullptr) return orErrorInvalidValue;
    if (auto e = known(start); e != orSuccess) return e;
    if (auto e = known(end); e != orSuccess) return e;
    if (!start->timing() || !end->timing()) return orErrorInvalidResourceHandle;
    auto a = start->last_record();
    auto b = end->last_record();
    if (!a || !b) return orErrorInvalidResourceHandle;
    if (!a->done() || !b->done()) return orErrorNotReady;
    const std::int64_t t0 = a->reached_ns.load();
    const std::int64_t t1 = b->reached_ns.load();
    // Zero means the marker was dropped at process exit and never ran.
    if (t0 == 0 || t1 == 0) return orErrorNotReady;
    *ms = static_cast<float>(static_cast<double>(t1 - t0) / 1e6);
    return orSuccess;
  });
}

orError_t orStreamWaitEvent(orStream_t stream, orEvent_t event, unsigned int flags) {
  return api_call([&]() -> orError_t {
    if (auto e = known(event); e != orSuccess) return e;
    if (flags != 0) return orErrorInvalidValue;
    StreamPtr s;
    if (auto e = Runtime::get().resolve(stream, &s); e != orSuccess) return e;
    auto record = event->last_record();
    // Never recorded counts as complete; the same stream is already in order.
    if (!record || record->stream == s || record->done()) return orSuccess;
    if (s->enqueue({[record] { record->stream->wait(record->seq); }, false}) == 0) {
      return orErrorRuntimeUnloading;
    }
    return orSuccess;
  });
}

}  // extern "C"
