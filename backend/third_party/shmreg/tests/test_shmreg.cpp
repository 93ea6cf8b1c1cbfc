// libshmreg end to end, against a real shmreg-server process.
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "shmreg.h"

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)
#define OK(expr) CHECK((expr) == shmSuccess)

namespace {

// Does process `pid` hold an fd on the device memory memfd?
bool holds_memfd(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return false;
  bool found = false;
  while (dirent* e = readdir(d)) {
    char target[256] = {};
    const std::string link = dir + "/" + e->d_name;
    if (readlink(link.c_str(), target, sizeof target - 1) > 0 &&
        std::strstr(target, "memfd:shmreg-device-memory") != nullptr) {
      found = true;
    }
  }
  closedir(d);
  return found;
}

int run_child(void (*body)()) {
  const pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

void fill(void* p) { std::memset(p, 7, 64); }

void uses_runtime() {
  void* p = nullptr;
  OK(shmMalloc(&p, 64));
  OK(shmLaunch(nullptr, &fill, p));
  unsigned char host[64];
  OK(shmMemcpy(host, p, 64));
  CHECK(host[63] == 7);
}

void must_refuse() {
  void* p = nullptr;
  CHECK(shmMalloc(&p, 64) == shmErrorInitializationError);
  CHECK(std::strstr(shmGetErrorString(shmErrorInitializationError), "forked") != nullptr);
}

}  // namespace

int main() {
  // Asking the device count starts no server (torch asks at import), so a
  // child forked after it, before any memory call, gets a server of its own.
  int n = 0;
  OK(shmGetDeviceCount(&n));
  CHECK(n == 2);
  CHECK(run_child(&uses_runtime) == 0);

  pid_t server = 0;
  OK(shmServerPid(&server));
  CHECK(server != getpid());
  // The memory is the server's: it holds the memfd, the client only a mapping.
  CHECK(holds_memfd(server));
  CHECK(!holds_memfd(getpid()));

  // Kernels run in the client on the mapping; memsets run in the server.
  void* a = nullptr;
  OK(shmSetDevice(1));
  OK(shmMalloc(&a, 1000));
  OK(shmMemsetAsync(a, 0x5a, 1000, nullptr));
  unsigned char host[1000];
  OK(shmMemcpyAsync(host, a, 1000, nullptr));
  OK(shmStreamSynchronize(nullptr));
  CHECK(host[0] == 0x5a && host[999] == 0x5a);

  // The server knows the allocation a pointer lies in.
  int kind = 0, device = -1;
  void* base = nullptr;
  size_t size = 0;
  OK(shmPointerGetInfo(static_cast<char*>(a) + 10, &kind, &device, &base, &size));
  CHECK(kind == 2 && device == 1 && base == a && size >= 1000);
  size_t free_before = 0, total = 0;
  OK(shmMemGetInfo(&free_before, &total));
  OK(shmFree(a));
  size_t free_after = 0;
  OK(shmMemGetInfo(&free_after, &total));
  CHECK(free_after > free_before);
  CHECK(shmFree(a) == shmErrorInvalidDevicePointer);

  // Streams and events: a stream waits for an event recorded on another.
  shmStream_t s1 = nullptr, s2 = nullptr;
  shmEvent_t e0 = nullptr, e1 = nullptr;
  OK(shmStreamCreate(&s1, 0));
  OK(shmStreamCreate(&s2, -1));
  OK(shmEventCreate(&e0, 1));
  OK(shmEventCreate(&e1, 1));
  OK(shmEventRecord(e0, s1));
  OK(shmLaunch(s1, [](void*) { usleep(20000); }, nullptr));
  OK(shmEventRecord(e1, s1));
  OK(shmStreamWaitEvent(s2, e1));
  OK(shmStreamSynchronize(s2));
  OK(shmEventQuery(e1));
  float ms = 0;
  OK(shmEventElapsedTime(&ms, e0, e1));
  CHECK(ms >= 15.0f);
  OK(shmEventDestroy(e0));
  OK(shmEventDestroy(e1));
  OK(shmStreamDestroy(s1));
  OK(shmStreamDestroy(s2));
  CHECK(shmStreamSynchronize(s1) == shmErrorInvalidResourceHandle);

  // A child forked now would share this process's connection: refused.
  CHECK(run_child(&must_refuse) == 0);

  // The server dies: calls that need it fail with a clear error, none hangs.
  CHECK(kill(server, SIGKILL) == 0);
  waitpid(server, nullptr, 0);
  void* b = nullptr;
  CHECK(shmMalloc(&b, 64) == shmErrorServerGone);
  CHECK(std::strstr(shmGetErrorString(shmErrorServerGone), "server") != nullptr);
  std::puts("shmreg: ok");
  return 0;
}
