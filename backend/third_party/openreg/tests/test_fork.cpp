// fork(): worker threads do not survive it, so a child of an initialised process must
// get a clear error instead of deadlocking on a stream that no longer runs.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "check.h"

namespace {

// Runs `body` in a child that ends through exit() (so atexit handlers run there too)
// and is killed by SIGALRM if anything hangs. Returns the child's exit code, or 128 +
// signal if it died.
template <typename F>
int run_child(F body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(10);
    body();
    std::exit(ortest::failures() == 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void noop(void*) {}

}  // namespace

// Must run in a fresh process (ctest runs it alone): the runtime must not exist yet.
OR_TEST(fork_before_init_leaves_the_child_a_working_runtime) {
  const int code = run_child([] {
    void* d = nullptr;
    CHECK_OK(orMalloc(&d, 256));
    CHECK_OK(orMemset(d, 9, 256));
    CHECK_OK(orLaunchKernel(nullptr, &noop, nullptr));
    unsigned char back = 0;
    CHECK_OK(orMemcpy(&back, d, 1, orMemcpyDeviceToHost));
    CHECK_EQ(static_cast<int>(back), 9);
    CHECK_OK(orFree(d));
  });
  CHECK_EQ(code, 0);
}

OR_TEST(fork_after_init_poisons_the_child) {
  void* d = nullptr;
  CHECK_OK(orMalloc(&d, 256));
  orStream_t s = nullptr;
  CHECK_OK(orStreamCreate(&s));
  CHECK_OK(orLaunchKernel(s, &noop, nullptr));
  CHECK_OK(orLaunchKernel(nullptr, &noop, nullptr));
  CHECK_OK(orDeviceSynchronize());

  const int code = run_child([d, s] {
    void* p = nullptr;
    CHECK_ERR(orMalloc(&p, 16), orErrorInitializationError);
    CHECK_ERR(orFree(d), orErrorInitializationError);
    CHECK_ERR(orLaunchKernel(s, &noop, nullptr), orErrorInitializationError);
    CHECK_ERR(orLaunchKernel(nullptr, &noop, nullptr), orErrorInitializationError);
    CHECK_ERR(orStreamSynchronize(s), orErrorInitializationError);
    CHECK_ERR(orDeviceSynchronize(), orErrorInitializationError);
    CHECK_ERR(orSetDevice(0), orErrorInitializationError);
    char host[4] = {};
    CHECK_ERR(orMemcpy(host, host + 2, 2, orMemcpyHostToHost), orErrorInitializationError);
    // Needs no runtime state, so it keeps answering (e.g. "is there a device at all").
    int n = -1;
    CHECK_OK(orGetDeviceCount(&n));
    CHECK(n >= 0);
    CHECK(std::strstr(orGetErrorString(orErrorInitializationError), "fork") != nullptr);
    // Returning runs exit(): the runtime's atexit handler must not wait for workers
    // that only exist in the parent.
  });
  CHECK_EQ(code, 0);

  // The parent is unaffected.
  CHECK_OK(orLaunchKernel(s, &noop, nullptr));
  CHECK_OK(orStreamSynchronize(s));
  CHECK_OK(orStreamDestroy(s));
  CHECK_OK(orFree(d));
}

OR_TEST_MAIN()
