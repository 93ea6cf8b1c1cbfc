// Synchronous copies, the default stream and kernels: the first things libtorch_openreg
// needs (allocate, upload, run a kernel, download).
#include <atomic>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "check.h"

namespace {

struct AddArgs {
  const float* a;
  const float* b;
  float* out;
  std::size_t n;
};

void add_kernel(void* p) {
  auto* args = static_cast<AddArgs*>(p);
  for (std::size_t i = 0; i < args->n; ++i) args->out[i] = args->a[i] + args->b[i];
}

}  // namespace

OR_TEST(upload_kernel_download_roundtrip) {
  const std::size_t n = 100000;
  std::vector<float> a(n), b(n), out(n, -1.0f);
  std::iota(a.begin(), a.end(), 0.0f);
  std::iota(b.begin(), b.end(), 1.0f);
  float *da = nullptr, *db = nullptr, *dout = nullptr;
  CHECK_OK(orMalloc(reinterpret_cast<void**>(&da), n * sizeof(float)));
  CHECK_OK(orMalloc(reinterpret_cast<void**>(&db), n * sizeof(float)));
  CHECK_OK(orMalloc(reinterpret_cast<void**>(&dout), n * sizeof(float)));
  CHECK_OK(orMemcpy(da, a.data(), n * sizeof(float), orMemcpyHostToDevice));
  CHECK_OK(orMemcpy(db, b.data(), n * sizeof(float), orMemcpyDefault));
  AddArgs args{da, db, dout, n};
  CHECK_OK(orLaunchKernel(nullptr, &add_kernel, &args));
  // orMemcpy waits for the default stream, so the kernel's result is there.
  CHECK_OK(orMemcpy(out.data(), dout, n * sizeof(float), orMemcpyDeviceToHost));
  bool all_right = true;
  for (std::size_t i = 0; i < n; ++i) all_right = all_right && out[i] == a[i] + b[i];
  CHECK(all_right);
  CHECK_OK(orFree(da));
  CHECK_OK(orFree(db));
  CHECK_OK(orFree(dout));
}

OR_TEST(device_to_device_across_devices_and_memset) {
  int n = 0;
  orGetDeviceCount(&n);
  void *d0 = nullptr, *d1 = nullptr;
  CHECK_OK(orMalloc(&d0, 4096));
  CHECK_OK(orSetDevice(n > 1 ? 1 : 0));
  CHECK_OK(orMalloc(&d1, 4096));
  CHECK_OK(orSetDevice(0));
  CHECK_OK(orMemset(d0, 0x5A, 4096));
  CHECK_OK(orMemcpy(d1, d0, 4096, orMemcpyDeviceToDevice));
  std::vector<unsigned char> host(4096, 0);
  CHECK_OK(orMemcpy(host.data(), d1, 4096, orMemcpyDefault));
  CHECK_EQ(static_cast<int>(host[0]), 0x5A);
  CHECK_EQ(static_cast<int>(host[4095]), 0x5A);
  CHECK_OK(orFree(d0));
  CHECK_OK(orFree(d1));
}

OR_TEST(memcpy_rejects_contradicting_kinds_and_overruns) {
  void* d = nullptr;
  CHECK_OK(orMalloc(&d, 1024));
  std::vector<char> h(2048);
  CHECK_ERR(orMemcpy(d, h.data(), 16, orMemcpyDeviceToHost), orErrorInvalidMemcpyDirection);
  CHECK_ERR(orMemcpy(h.data(), d, 16, orMemcpyHostToDevice), orErrorInvalidMemcpyDirection);
  CHECK_ERR(orMemcpy(h.data(), h.data() + 16, 16, orMemcpyDeviceToDevice),
            orErrorInvalidMemcpyDirection);
  CHECK_ERR(orMemcpy(d, h.data(), 16, orMemcpyHostToHost), orErrorInvalidMemcpyDirection);
  CHECK_ERR(orMemcpy(d, h.data(), 16, static_cast<orMemcpyKind>(42)),
            orErrorInvalidMemcpyDirection);
  CHECK_ERR(orMemcpy(d, h.data(), 1025, orMemcpyHostToDevice), orErrorInvalidValue);
  CHECK_ERR(orMemcpy(static_cast<char*>(d) + 1000, h.data(), 25, orMemcpyHostToDevice),
            orErrorInvalidValue);
  CHECK_ERR(orMemset(h.data(), 0, 16), orErrorInvalidValue);
  CHECK_OK(orMemcpy(d, h.data(), 0, orMemcpyHostToDevice));
  CHECK_OK(orMemcpy(h.data(), h.data() + 1024, 1024, orMemcpyHostToHost));
  CHECK_OK(orFree(d));
  // A freed block is no longer a valid copy target.
  CHECK_ERR(orMemcpy(d, h.data(), 16, orMemcpyHostToDevice), orErrorInvalidValue);
}

OR_TEST(kernels_run_in_order_on_the_default_stream) {
  std::vector<int> order;
  struct Step {
    std::vector<int>* order;
    int id;
  };
  std::vector<Step> steps;
  for (int i = 0; i < 100; ++i) steps.push_back({&order, i});
  for (auto& s : steps) {
    CHECK_OK(orLaunchKernel(nullptr, [](void* p) {
      auto* step = static_cast<Step*>(p);
      step->order->push_back(step->id);
    }, &s));
  }
  CHECK_OK(orDeviceSynchronize());
  CHECK_EQ(order.size(), std::size_t{100});
  bool in_order = true;
  for (int i = 0; i < static_cast<int>(order.size()); ++i) in_order = in_order && order[i] == i;
  CHECK(in_order);
}

OR_TEST(kernel_exception_is_reported_by_the_next_sync) {
  CHECK_OK(orLaunchKernel(nullptr, [](void*) { throw std::runtime_error("boom"); }, nullptr));
  std::atomic<int> after{0};
  CHECK_OK(orLaunchKernel(nullptr, [](void* p) { static_cast<std::atomic<int>*>(p)->store(1); },
                          &after));
  CHECK_ERR(orStreamSynchronize(nullptr), orErrorLaunchFailure);
  CHECK_EQ(after.load(), 1);  // the stream kept running
  CHECK_OK(orStreamSynchronize(nullptr));  // reported once
}

OR_TEST_MAIN()
