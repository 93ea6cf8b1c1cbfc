// Process exit with live streams: must neither hang nor crash, and calls made by
// static destructors that run after the runtime stopped its streams must behave.
//
// The scenario (argv[1]) runs in a forked child that simply returns from main:
//   busy     streams with queued work and a running kernel when main returns
//   stuck    a kernel that never returns (exit must still finish, bounded)
// In both, a static object constructed before the runtime is destroyed after the
// runtime's atexit handler and calls into the API from its destructor; it reports
// through a pipe. The parent checks the child's exit status, time and report.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "openreg.h"

using namespace std::chrono_literals;

namespace {

orStream_t g_stream = nullptr;
void* g_device_block = nullptr;
int g_report_fd = -1;

void fail(const char* what, orError_t got) {
  std::fprintf(stderr, "test_exit: %s returned %s\n", what, orGetErrorName(got));
  std::fflush(stderr);
  _exit(3);
}

struct LateUser {
  ~LateUser() {
    if (g_stream == nullptr) return;
    // Pending work was dropped, so this returns immediately instead of hanging.
    if (auto e = orStreamSynchronize(g_stream); e != orSuccess) fail("late orStreamSynchronize", e);
    if (auto e = orDeviceSynchronize(); e != orSuccess) fail("late orDeviceSynchronize", e);
    if (auto e = orLaunchKernel(g_stream, [](void*) {}, nullptr); e != orErrorRuntimeUnloading) {
      fail("late orLaunchKernel", e);
    }
    orStream_t fresh = nullptr;
    if (auto e = orStreamCreate(&fresh); e != orErrorRuntimeUnloading) fail("late orStreamCreate", e);
    // Freeing memory still works: allocators are commonly torn down by statics.
    if (auto e = orFree(g_device_block); e != orSuccess) fail("late orFree", e);
    const char ok = 'y';
    if (write(g_report_fd, &ok, 1) != 1) _exit(4);
  }
};
LateUser g_late_user;  // constructed before main, hence before the runtime

std::atomic<bool> g_forever{true};

}  // namespace

int scenario(bool stuck) {
  if (orMalloc(&g_device_block, 1 << 20) != orSuccess) return 2;
  if (orStreamCreate(&g_stream) != orSuccess) return 2;
  orStream_t other = nullptr;
  orStreamCreate(&other);
  orEvent_t ev = nullptr;
  orEventCreate(&ev);

  std::atomic<bool> started{false};
  orLaunchKernel(g_stream, [](void* p) {
    static_cast<std::atomic<bool>*>(p)->store(true);
    std::this_thread::sleep_for(100ms);
  }, &started);
  if (stuck) {
    orLaunchKernel(other, [](void*) {
      while (g_forever.load()) std::this_thread::sleep_for(1ms);
    }, nullptr);
  }
  for (int i = 0; i < 1000; ++i) {
    orLaunchKernel(g_stream, [](void*) { std::this_thread::sleep_for(1ms); }, nullptr);
    orMemsetAsync(g_device_block, i, 1 << 20, other);
  }
  orEventRecord(ev, g_stream);
  orStreamWaitEvent(other, ev, 0);
  orLaunchHostFunc(nullptr, [](void*) { std::this_thread::sleep_for(50ms); }, nullptr);
  while (!started.load()) std::this_thread::sleep_for(1ms);
  std::fprintf(stderr, "test_exit: returning from main with live streams (%s)\n",
               stuck ? "stuck" : "busy");
  return 0;  // ~1 s of queued work is dropped, not waited for
}

int main(int argc, char** argv) {
  const bool stuck = argc > 1 && std::strcmp(argv[1], "stuck") == 0;
  int fds[2];
  if (pipe(fds) != 0) return 2;
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();  // before any runtime call: the child starts clean
  if (pid == 0) {
    close(fds[0]);
    g_report_fd = fds[1];
    alarm(30);  // a hang becomes a SIGALRM death, not a stuck test
    return scenario(stuck);
  }
  close(fds[1]);
  int status = 0;
  waitpid(pid, &status, 0);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  char report = 'n';
  const bool reported = read(fds[0], &report, 1) == 1 && report == 'y';
  std::printf("child: %s %d after %.2f s, late calls %s\n",
              WIFEXITED(status) ? "exit code" : "killed by signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), secs,
              reported ? "behaved" : "did not report");
  // Exit waits at most 2 s for running kernels; allow scheduling slack on a busy box.
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && reported && secs < 8.0;
  return ok ? 0 : 1;
}
