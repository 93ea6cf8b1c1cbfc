// Device memory is inaccessible to host code except inside kernels and runtime copies.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "check.h"

namespace {

// Runs `body` in a forked child and returns the signal that killed it (0 if none).
template <typename F>
int signal_of_child(F body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

void write_byte(void* p) { *static_cast<volatile char*>(p) = 1; }

}  // namespace

OR_TEST(host_access_to_device_memory_segfaults) {
  void* d = nullptr;
  CHECK_OK(orMalloc(&d, 4096));
  CHECK_OK(orMemset(d, 0, 4096));  // touched once, then protected again
  CHECK_EQ(signal_of_child([d] { write_byte(d); }), SIGSEGV);
  CHECK_EQ(signal_of_child([d] { (void)*static_cast<volatile char*>(d); }), SIGSEGV);
  // Control: pageable memory in the same kind of child is fine.
  static char host[16];
  CHECK_EQ(signal_of_child([] { write_byte(host); }), 0);
  CHECK_OK(orFree(d));
}

OR_TEST(kernels_may_touch_device_memory) {
  void* d = nullptr;
  CHECK_OK(orMalloc(&d, 4096));
  CHECK_OK(orLaunchKernel(nullptr, [](void* p) { std::memset(p, 7, 4096); }, d));
  CHECK_OK(orDeviceSynchronize());
  unsigned char back[4096];
  CHECK_OK(orMemcpy(back, d, sizeof back, orMemcpyDeviceToHost));
  CHECK_EQ(static_cast<int>(back[4095]), 7);
  CHECK_OK(orFree(d));
}

OR_TEST(memory_allocated_while_a_kernel_runs_is_accessible_to_kernels) {
  // A long kernel keeps the window open; blocks allocated meanwhile lie beyond the
  // span exposed when it opened and must be exposed too. The small first block makes
  // the used span end off any page boundary.
  void* small = nullptr;
  CHECK_OK(orMalloc(&small, 1000));
  static std::atomic<int> phase{0};
  CHECK_OK(orLaunchKernel(nullptr, [](void*) {
    phase.store(1);
    while (phase.load() != 2) {
    }
  }, nullptr));
  while (phase.load() != 1) {
  }
  orStream_t other = nullptr;
  CHECK_OK(orStreamCreate(&other));
  struct Fill {
    void* p;
    std::size_t n;
  };
  std::vector<Fill> fills;
  for (std::size_t size : {std::size_t{1000}, std::size_t{3} << 20, std::size_t{5} << 20,
                           std::size_t{700}}) {
    void* p = nullptr;
    CHECK_OK(orMalloc(&p, size));
    fills.push_back({p, size});
  }
  for (auto& f : fills) {
    CHECK_OK(orLaunchKernel(other, [](void* a) {
      auto* fill = static_cast<Fill*>(a);
      std::memset(fill->p, 3, fill->n);
    }, &f));
  }
  CHECK_OK(orStreamSynchronize(other));
  phase.store(2);
  CHECK_OK(orDeviceSynchronize());
  for (auto& f : fills) {
    unsigned char last = 0;
    CHECK_OK(orMemcpy(&last, static_cast<char*>(f.p) + f.n - 1, 1, orMemcpyDeviceToHost));
    CHECK_EQ(static_cast<int>(last), 3);
    CHECK_OK(orFree(f.p));
  }
  CHECK_OK(orStreamDestroy(other));
  CHECK_OK(orFree(small));
}

// A forked child inherits the parent's page protections as they are at fork time, so
// forking while work blocks a stream shows whether the access window is open then.
void window_while_blocked(bool kernel, int expected_signal) {
  void* d = nullptr;
  CHECK_OK(orMalloc(&d, 4096));
  static std::atomic<int> phase{0};
  phase = 0;
  auto block = [](void*) {
    phase.store(1);
    while (phase.load() != 2) {
    }
  };
  CHECK_OK(kernel ? orLaunchKernel(nullptr, block, nullptr)
                  : orLaunchHostFunc(nullptr, block, nullptr));
  while (phase.load() != 1) {
  }
  CHECK_EQ(signal_of_child([d] { write_byte(d); }), expected_signal);
  phase.store(2);
  CHECK_OK(orDeviceSynchronize());
  CHECK_OK(orFree(d));
}

OR_TEST(host_functions_get_no_access_window) { window_while_blocked(false, SIGSEGV); }

// The window is process-wide (kernels may use thread pools), and this shows the
// SIGSEGV above comes from the gate, not from the memory being unusable.
OR_TEST(a_running_kernel_opens_the_window_process_wide) { window_while_blocked(true, 0); }

// Back-to-back kernels share one opening of the window (the stream keeps it open
// while kernels are queued); it must still be closed once they are done, and
// for a host function queued behind them.
OR_TEST(window_closes_after_a_burst_of_kernels) {
  void* d = nullptr;
  CHECK_OK(orMalloc(&d, 4096));
  CHECK_OK(orMemset(d, 0, 4096));
  static std::atomic<int> phase{0};
  phase = 0;
  auto count = [](void* p) { ++*static_cast<volatile char*>(p); };
  for (int i = 0; i < 64; ++i) CHECK_OK(orLaunchKernel(nullptr, count, d));
  CHECK_OK(orLaunchHostFunc(nullptr, [](void*) {
    phase.store(1);
    while (phase.load() != 2) {
    }
  }, nullptr));
  for (int i = 0; i < 64; ++i) CHECK_OK(orLaunchKernel(nullptr, count, d));
  while (phase.load() != 1) {
  }
  CHECK_EQ(signal_of_child([d] { write_byte(d); }), SIGSEGV);
  phase.store(2);
  CHECK_OK(orDeviceSynchronize());
  CHECK_EQ(signal_of_child([d] { write_byte(d); }), SIGSEGV);
  unsigned char back = 0;
  CHECK_OK(orMemcpy(&back, d, 1, orMemcpyDeviceToHost));
  CHECK_EQ(static_cast<int>(back), 128);
  CHECK_OK(orFree(d));
}

OR_TEST_MAIN()
