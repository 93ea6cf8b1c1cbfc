// Launch latency and the price of device-memory protection, measured in one run.
//
//   bench_openreg           print the numbers
//   bench_openreg --check   quick run for ctest: latency and a 16 MiB gate only, and
//                           fail (exit 1) if either is far off (e.g. a polling loop
//                           or mprotect of a whole arena slipped in)
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "access_gate.h"
#include "arena.h"
#include "openreg.h"

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

double us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

struct Percentiles {
  double p50, p90, p99;
};

Percentiles percentiles(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[static_cast<std::size_t>(q * (v.size() - 1))]; };
  return {at(0.5), at(0.9), at(0.99)};
}

struct Stamp {
  std::atomic<Clock::rep> started{0};
};

void stamp(void* p) {
  static_cast<Stamp*>(p)->started.store(Clock::now().time_since_epoch().count());
}

// Enqueue -> start on an idle stream: the worker is asleep on its condition variable,
// which is the common case between ops in eager mode.
Percentiles wake_latency(orStream_t s, bool kernel, int rounds) {
  std::vector<double> samples;
  for (int i = 0; i < rounds; ++i) {
    Stamp st;
    const auto t0 = Clock::now();
    if (kernel) {
      orLaunchKernel(s, &stamp, &st);
    } else {
      orLaunchHostFunc(s, &stamp, &st);
    }
    orStreamSynchronize(s);
    samples.push_back(us(Clock::duration(st.started.load()) - t0.time_since_epoch()));
    std::this_thread::sleep_for(200us);  // let the worker go back to sleep
  }
  return percentiles(samples);
}

double per_item_us(orStream_t s, bool kernel, int n) {
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    if (kernel) {
      orLaunchKernel(s, [](void*) {}, nullptr);
    } else {
      orLaunchHostFunc(s, [](void*) {}, nullptr);
    }
  }
  orStreamSynchronize(s);
  return us(Clock::now() - t0) / n;
}

// One enter/leave pair of the access gate (two mprotect calls) with `touched` bytes
// resident at the start of the arena.
double gate_pair_us(std::size_t touched) {
  openreg::Arena arena(std::size_t{4} << 30);
  bool grew = false;
  void* p = touched ? arena.allocate(touched, &grew) : nullptr;
  openreg::AccessGate gate({&arena});
  if (p != nullptr) {
    gate.enter();
    std::memset(p, 1, touched);  // make the pages resident, as real tensors are
    gate.leave();
  }
  const int n = touched >= (std::size_t{256} << 20) ? 200 : 2000;
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    gate.enter();
    gate.leave();
  }
  return us(Clock::now() - t0) / n;
}

struct AddArgs {
  const float* a;
  const float* b;
  float* out;
  std::size_t n;
};

void add(void* p) {
  auto* x = static_cast<AddArgs*>(p);
  for (std::size_t i = 0; i < x->n; ++i) x->out[i] = x->a[i] + x->b[i];
}

// A 1M-element add as an eager op would run it: launch on the current stream and wait.
void add_vs_cpu() {
  const std::size_t n = 1 << 20;
  const std::size_t bytes = n * sizeof(float);
  std::vector<float> ha(n, 1.0f), hb(n, 2.0f), hout(n);
  float *da, *db, *dout;
  orMalloc(reinterpret_cast<void**>(&da), bytes);
  orMalloc(reinterpret_cast<void**>(&db), bytes);
  orMalloc(reinterpret_cast<void**>(&dout), bytes);
  orMemcpy(da, ha.data(), bytes, orMemcpyHostToDevice);
  orMemcpy(db, hb.data(), bytes, orMemcpyHostToDevice);
  orMemset(dout, 0, bytes);
  AddArgs host_args{ha.data(), hb.data(), hout.data(), n};
  AddArgs dev_args{da, db, dout, n};
  const int rounds = 200;
  double cpu = 1e30, dev = 1e30;
  for (int r = 0; r < 3; ++r) {  // best of 3 to dampen noise from other jobs
    auto t0 = Clock::now();
    for (int i = 0; i < rounds; ++i) add(&host_args);
    cpu = std::min(cpu, us(Clock::now() - t0) / rounds);
    t0 = Clock::now();
    for (int i = 0; i < rounds; ++i) {
      orLaunchKernel(nullptr, &add, &dev_args);
      orStreamSynchronize(nullptr);
    }
    dev = std::min(dev, us(Clock::now() - t0) / rounds);
  }
  std::printf("1M-float add: CPU %.1f us, openreg launch+sync %.1f us, ratio %.2f\n", cpu, dev,
              dev / cpu);
  orFree(da);
  orFree(db);
  orFree(dout);
}

}  // namespace

int main(int argc, char** argv) {
  const bool check = argc > 1 && std::strcmp(argv[1], "--check") == 0;
  orStream_t s = nullptr;
  orStreamCreate(&s);
  per_item_us(s, true, 1000);  // warm up

  const Percentiles host = wake_latency(s, false, 1000);
  const Percentiles kern = wake_latency(s, true, 1000);
  std::printf("enqueue->start, idle stream, host func: p50 %.1f us  p90 %.1f us  p99 %.1f us\n",
              host.p50, host.p90, host.p99);
  std::printf("enqueue->start, idle stream, kernel:    p50 %.1f us  p90 %.1f us  p99 %.1f us\n",
              kern.p50, kern.p90, kern.p99);

  const double hf = per_item_us(s, false, 20000);
  const double kf = per_item_us(s, true, 20000);
  std::printf("back-to-back empty items: host func %.2f us, kernel %.2f us each\n", hf, kf);
  // What a profiler window costs: each kernel is timed and appended to the
  // activity buffer (drained after, so the buffer stays small).
  orActivityEnable(1);
  const double traced = per_item_us(s, true, 20000);
  orActivityEnable(0);
  std::printf("back-to-back empty kernels with activity tracing on: %.2f us each\n", traced);

  double gate16 = 0;
  for (std::size_t mb : {0, 16, 256, 1024}) {
    if (check && mb > 16) break;
    const double t = gate_pair_us(mb << 20);
    if (mb == 16) gate16 = t;
    std::printf("access gate enter+leave with %4zu MiB resident: %.2f us\n", mb, t);
  }
  if (!check) add_vs_cpu();
  orStreamDestroy(s);

  // Limits are an order of magnitude above what this machine measures, so that load
  // from other jobs does not make the test flaky.
  int failed = 0;
  if (check && kern.p50 > 500.0) {
    std::printf("FAIL: median kernel wake-up latency %.1f us (limit 500 us)\n", kern.p50);
    failed = 1;
  }
  if (check && gate16 > 5000.0) {
    std::printf("FAIL: access gate with 16 MiB resident %.1f us (limit 5000 us)\n", gate16);
    failed = 1;
  }
  return failed;
}
