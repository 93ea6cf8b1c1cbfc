// libshmreg: connecting to the server, devices, memory.
#include "client.h"

#include <dlfcn.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

extern char** environ;

namespace shmreg {

namespace {

std::uint64_t env_number(const char* name, const char* fallback, std::uint64_t dflt) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') text = std::getenv(fallback);
  if (text == nullptr || *text < '0' || *text > '9') return dflt;
  return std::strtoull(text, nullptr, 10);
}

// [shmreg-memory-limit]
// Device memory is one file (the server's memfd), so it counts against RLIMIT_FSIZE,
// which the server inherits: under a file-size limit (a CI sandbox sets one) each
// device gets its share of the limit instead of a server that cannot start.
std::uint64_t bytes_per_device(int devices, std::uint64_t wanted) {
  rlimit limit{};
  if (devices <= 0 || getrlimit(RLIMIT_FSIZE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) {
    return wanted;
  }
  const std::uint64_t share = static_cast<std::uint64_t>(limit.rlim_cur) / devices;
  return wanted < share ? wanted : share & ~std::uint64_t{4095};
}
// [/shmreg-memory-limit]

}  // namespace

const Config& config() {
  static const Config cfg = [] {
    const int devices =
        static_cast<int>(env_number("SHMREG_DEVICE_COUNT", "OPENREG_DEVICE_COUNT", 2));
    return Config{devices, bytes_per_device(devices, env_number("SHMREG_DEVICE_MEMORY",
                                                                "OPENREG_DEVICE_MEMORY",
                                                                std::uint64_t{16} << 30))};
  }();
  return cfg;
}

namespace {

// The server binary is installed next to this library.
std::string server_path() {
  if (const char* p = std::getenv("SHMREG_SERVER"); p != nullptr && *p != '\0') return p;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&shmGetDeviceCount), &info) == 0 || info.dli_fname == nullptr) {
    return "shmreg-server";
  }
  std::string lib = info.dli_fname;
  const auto slash = lib.rfind('/');
  return (slash == std::string::npos ? std::string(".") : lib.substr(0, slash)) + "/shmreg-server";
}

bool receive(int sock, Reply* r, int* fd) {
  iovec iov{r, sizeof *r};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof *r)) return false;
  if (fd != nullptr) {
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    if (c == nullptr || c->cmsg_type != SCM_RIGHTS) return false;
    std::memcpy(fd, CMSG_DATA(c), sizeof(int));
  }
  return true;
}

// Host memory handed out by shmMallocHost ("pinned": the runtime knows it).
std::mutex g_host_mu;
std::map<const unsigned char*, size_t>& host_blocks() {
  static auto* blocks = new std::map<const unsigned char*, size_t>;
  return *blocks;
}

}  // namespace

int& current_device() {
  thread_local int device = 0;
  return device;
}

// [shmreg-fork]
shmError_t Client::get(Client** out) {
  // Never destroyed: stream threads may still use it while the process exits.
  static std::atomic<Client*> client{nullptr};
  Client* c = client.load(std::memory_order_acquire);
  if (c == nullptr) {
    static std::mutex mu;
    std::lock_guard<std::mutex> lock(mu);
    c = client.load(std::memory_order_relaxed);
    if (c == nullptr) {
      c = new Client;
      if (shmError_t e = c->connect(); e != shmSuccess) {
        delete c;
        return e;
      }
      client.store(c, std::memory_order_release);
    }
  }
  // Checked before any lock: a child forked while a parent thread held one
  // must get this error, not a deadlock.
  if (c->owner_pid_ != getpid()) return shmErrorInitializationError;
  *out = c;
  return shmSuccess;
}
// [/shmreg-fork]

shmError_t Client::connect() {
  const auto devices = config().devices;
  const auto capacity = config().capacity;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return shmErrorInitializationError;
  // The server's end becomes its fd 3 (dup2 in the child clears CLOEXEC).
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, sv[1], 3);
  const std::string path = server_path();
  const std::string dev_arg = std::to_string(devices), cap_arg = std::to_string(capacity);
  char* argv[] = {const_cast<char*>("shmreg-server"), const_cast<char*>("3"),
                  const_cast<char*>(dev_arg.c_str()), const_cast<char*>(cap_arg.c_str()), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, path.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(sv[1]);
  if (rc != 0) {
    std::fprintf(stderr, "shmreg: cannot start %s: %s\n", path.c_str(), std::strerror(rc));
    close(sv[0]);
    return shmErrorInitializationError;
  }
  sock_ = sv[0];
  server_pid_ = pid;
  owner_pid_ = getpid();
  Request hello{Op::Hello, 0, 0, 0, 0};
  Reply r{};
  int memfd = -1;
  if (send(sock_, &hello, sizeof hello, MSG_NOSIGNAL) != sizeof hello || !receive(sock_, &r, &memfd)) {
    close(sock_);
    return shmErrorInitializationError;
  }
  devices_ = static_cast<int>(r.a);
  capacity_ = r.b;
  if (devices_ > 0) {
    void* p = mmap(nullptr, capacity_ * devices_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd, 0);
    if (p == MAP_FAILED) {
      close(memfd);
      close(sock_);
      return shmErrorInitializationError;
    }
    base_ = static_cast<unsigned char*>(p);
  }
  close(memfd);  // the mapping keeps the memory; the server holds the fd
  return shmSuccess;
}

// [shmreg-server-gone]
shmError_t Client::call(const Request& q, Reply* r) {
  std::lock_guard<std::mutex> lock(call_mu_);
  if (gone_) return shmErrorServerGone;
  if (send(sock_, &q, sizeof q, MSG_NOSIGNAL) != sizeof q || !receive(sock_, r, nullptr)) {
    gone_ = true;  // EOF or EPIPE: the server exited or was killed
    return shmErrorServerGone;
  }
  return static_cast<shmError_t>(r->error);
}
// [/shmreg-server-gone]

int Client::device_of(const void* p) const {
  const auto* b = static_cast<const unsigned char*>(p);
  if (base_ == nullptr || b < base_ || b >= base_ + capacity_ * devices_) return -1;
  return static_cast<int>((b - base_) / capacity_);
}

}  // namespace shmreg

using namespace shmreg;

#define SHMREG_CLIENT(c)                              \
  Client* c = nullptr;                                \
  if (shmError_t e_ = Client::get(&c); e_ != shmSuccess) return e_

extern "C" {

const char* shmGetErrorName(shmError_t e) {
  switch (e) {
    case shmSuccess: return "shmSuccess";
    case shmErrorInvalidValue: return "shmErrorInvalidValue";
    case shmErrorMemoryAllocation: return "shmErrorMemoryAllocation";
    case shmErrorInvalidDevice: return "shmErrorInvalidDevice";
    case shmErrorInvalidResourceHandle: return "shmErrorInvalidResourceHandle";
    case shmErrorNotReady: return "shmErrorNotReady";
    case shmErrorInvalidDevicePointer: return "shmErrorInvalidDevicePointer";
    case shmErrorInitializationError: return "shmErrorInitializationError";
    case shmErrorNotPermitted: return "shmErrorNotPermitted";
    case shmErrorServerGone: return "shmErrorServerGone";
  }
  return "shmErrorUnknown";
}

const char* shmGetErrorString(shmError_t e) {
  switch (e) {
    case shmSuccess: return "no error";
    case shmErrorInvalidValue: return "invalid argument";
    case shmErrorMemoryAllocation: return "out of memory";
    case shmErrorInvalidDevice: return "invalid device ordinal";
    case shmErrorInvalidResourceHandle: return "invalid resource handle";
    case shmErrorNotReady: return "device not ready";
    case shmErrorInvalidDevicePointer: return "invalid device pointer";
    case shmErrorInitializationError:
      return "shmreg cannot be used here: the server did not start, or this is a child forked "
             "after the parent used shmreg (use the 'spawn' start method)";
    case shmErrorNotPermitted: return "operation not permitted";
    case shmErrorServerGone:
      return "the shmreg server process (which holds the device memory) has exited";
  }
  return "unknown error";
}

// Device count and the current device need no server: asking them (torch
// does at import) must not start one, so that a process can still fork
// children that start their own.
shmError_t shmGetDeviceCount(int* count) {
  if (count == nullptr) return shmErrorInvalidValue;
  *count = config().devices;
  return shmSuccess;
}

shmError_t shmSetDevice(int device) {
  if (device < 0 || device >= config().devices) return shmErrorInvalidDevice;
  current_device() = device;
  return shmSuccess;
}

shmError_t shmGetDevice(int* device) {
  if (device == nullptr) return shmErrorInvalidValue;
  *device = current_device();
  return shmSuccess;
}

shmError_t shmServerPid(pid_t* pid) {
  if (pid == nullptr) return shmErrorInvalidValue;
  SHMREG_CLIENT(c);
  *pid = c->server_pid();
  return shmSuccess;
}

shmError_t shmMalloc(void** dev_ptr, size_t size) {
  if (dev_ptr == nullptr) return shmErrorInvalidValue;
  *dev_ptr = nullptr;
  SHMREG_CLIENT(c);
  if (size == 0) return shmSuccess;  // as cudaMalloc
  Reply r{};
  if (shmError_t e = c->call({Op::Malloc, current_device(), size, 0, 0}, &r); e != shmSuccess) return e;
  *dev_ptr = c->base() + r.a;
  return shmSuccess;
}

shmError_t shmFree(void* dev_ptr) {
  if (dev_ptr == nullptr) return shmSuccess;
  SHMREG_CLIENT(c);
  if (c->device_of(dev_ptr) < 0) return shmErrorInvalidDevicePointer;
  Reply r{};
  return c->call({Op::Free, 0, c->offset_of(dev_ptr), 0, 0}, &r);
}

shmError_t shmMallocHost(void** host_ptr, size_t size) {
  if (host_ptr == nullptr) return shmErrorInvalidValue;
  *host_ptr = nullptr;
  if (size == 0) return shmSuccess;
  void* p = nullptr;
  if (posix_memalign(&p, 4096, size) != 0) return shmErrorMemoryAllocation;
  std::lock_guard<std::mutex> lock(g_host_mu);
  host_blocks()[static_cast<unsigned char*>(p)] = size;
  *host_ptr = p;
  return shmSuccess;
}

shmError_t shmFreeHost(void* host_ptr) {
  if (host_ptr == nullptr) return shmSuccess;
  std::lock_guard<std::mutex> lock(g_host_mu);
  if (host_blocks().erase(static_cast<unsigned char*>(host_ptr)) == 0) return shmErrorInvalidValue;
  std::free(host_ptr);
  return shmSuccess;
}

shmError_t shmPointerGetInfo(const void* ptr, int* kind, int* device, void** base, size_t* size) {
  if (kind == nullptr || device == nullptr || base == nullptr || size == nullptr) return shmErrorInvalidValue;
  *kind = 0;
  *device = -1;
  *base = nullptr;
  *size = 0;
  {
    std::lock_guard<std::mutex> lock(g_host_mu);
    auto& blocks = host_blocks();
    auto it = blocks.upper_bound(static_cast<const unsigned char*>(ptr));
    if (it != blocks.begin() && static_cast<const unsigned char*>(ptr) < std::prev(it)->first + std::prev(it)->second) {
      --it;
      *kind = 1;
      *base = const_cast<unsigned char*>(it->first);
      *size = it->second;
      return shmSuccess;
    }
  }
  SHMREG_CLIENT(c);
  const int d = c->device_of(ptr);
  if (d < 0) return shmSuccess;
  *kind = 2;
  *device = d;
  Reply r{};
  // Which allocation holds it is the server's knowledge; a pointer into
  // device memory that no allocation holds is still device memory.
  if (c->call({Op::Find, 0, c->offset_of(ptr), 0, 0}, &r) == shmSuccess) {
    *base = c->base() + r.a;
    *size = r.b;
  } else if (r.error != shmErrorInvalidDevicePointer) {
    return shmErrorServerGone;
  }
  return shmSuccess;
}

shmError_t shmMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (free_bytes == nullptr || total_bytes == nullptr) return shmErrorInvalidValue;
  SHMREG_CLIENT(c);
  Reply r{};
  if (shmError_t e = c->call({Op::MemInfo, current_device(), 0, 0, 0}, &r); e != shmSuccess) return e;
  *free_bytes = r.a;
  *total_bytes = r.b;
  return shmSuccess;
}

}  // extern "C"
