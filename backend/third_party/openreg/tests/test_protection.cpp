// Device memory is inaccessible to host code except inside kernels and runtime copies.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

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
  // Host functions are not kernels: no access window.
  orPointerAttributes at{};
  CHECK_OK(orPointerGetAttributes(&at, d));
  CHECK_OK(orFree(d));
}

OR_TEST(memory_allocated_while_a_kernel_runs_is_accessible_to_kernels) {
  // A long kernel keeps the window open; a block allocated meanwhile lies beyond the
  // span exposed at open time and must be exposed as well.
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
  void* fresh = nullptr;
  CHECK_OK(orMalloc(&fresh, 1 << 20));
  CHECK_OK(orLaunchKernel(other, [](void* p) { std::memset(p, 3, 1 << 20); }, fresh));
  CHECK_OK(orStreamSynchronize(other));
  phase.store(2);
  CHECK_OK(orDeviceSynchronize());
  unsigned char last = 0;
  CHECK_OK(orMemcpy(&last, static_cast<char*>(fresh) + (1 << 20) - 1, 1, orMemcpyDeviceToHost));
  CHECK_EQ(static_cast<int>(last), 3);
  CHECK_OK(orStreamDestroy(other));
  CHECK_OK(orFree(fresh));
}

OR_TEST_MAIN()
