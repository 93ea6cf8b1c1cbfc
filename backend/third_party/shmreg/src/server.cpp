// shmreg-server: owns the device memory of one libshmreg client.
//
// Started by the client with its end of a socket pair as fd 3; exits when
// every holder of the client's end has closed it (the client exited, however
// it died), so a server never outlives the process it serves. Not
// PR_SET_PDEATHSIG: that fires when the spawning *thread* exits, and the first
// device call may come from a short-lived thread. The memory is one memfd, device
// d at [d * capacity, (d + 1) * capacity): sparse, so unused capacity costs
// nothing. Allocation state lives only here: the client asks.
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <vector>

#include "protocol.h"
#include "shmreg.h"

namespace {

using shmreg::kAlignment;
using shmreg::Op;
using shmreg::Reply;
using shmreg::Request;

// First fit over one device's range; frees coalesce with their neighbours.
class DeviceHeap {
 public:
  DeviceHeap(std::uint64_t start, std::uint64_t capacity) : capacity_(capacity) {
    free_[start] = capacity;
  }

  bool allocate(std::uint64_t size, std::uint64_t* offset) {
    size = (size + kAlignment - 1) / kAlignment * kAlignment;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < size) continue;
      *offset = it->first;
      if (it->second > size) free_[it->first + size] = it->second - size;
      free_.erase(it);
      used_[*offset] = size;
      in_use_ += size;
      return true;
    }
    return false;
  }

  bool release(std::uint64_t offset) {
    auto it = used_.find(offset);
    if (it == used_.end()) return false;
    std::uint64_t start = offset, size = it->second;
    in_use_ -= size;
    used_.erase(it);
    auto next = free_.lower_bound(start);
    if (next != free_.end() && next->first == start + size) {
      size += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == start) {
        prev->second += size;
        return true;
      }
    }
    free_[start] = size;
    return true;
  }

  // The allocation containing `offset`, if any.
  bool find(std::uint64_t offset, std::uint64_t* start, std::uint64_t* size) const {
    auto it = used_.upper_bound(offset);
    if (it == used_.begin()) return false;
    --it;
    if (offset >= it->first + it->second) return false;
    *start = it->first;
    *size = it->second;
    return true;
  }

  bool owns(std::uint64_t offset) const { return used_.count(offset) != 0; }
  std::uint64_t free_bytes() const { return capacity_ - in_use_; }
  std::uint64_t capacity() const { return capacity_; }

 private:
  std::uint64_t capacity_;
  std::uint64_t in_use_ = 0;
  std::map<std::uint64_t, std::uint64_t> free_;  // start -> size
  std::map<std::uint64_t, std::uint64_t> used_;  // start -> size
};

bool send_reply(int sock, const Reply& r, int fd_to_pass = -1) {
  iovec iov{const_cast<Reply*>(&r), sizeof r};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (fd_to_pass >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd_to_pass, sizeof(int));
  }
  return sendmsg(sock, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof r);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: shmreg-server <socket fd> <devices> <bytes per device>\n"
                         "(started by libshmreg, not by hand)\n");
    return 2;
  }
  const int sock = std::atoi(argv[1]);
  const int devices = std::atoi(argv[2]);
  const std::uint64_t capacity = std::strtoull(argv[3], nullptr, 10);
  // [shmreg-server-memory]
  // The client's terminal signals (Ctrl-C) are for the client; it decides.
  std::signal(SIGINT, SIG_IGN);

  const int memfd = memfd_create("shmreg-device-memory", MFD_CLOEXEC);
  if (memfd < 0 || ftruncate(memfd, static_cast<off_t>(capacity * devices)) != 0) {
    std::perror("shmreg-server: device memory");
    return 1;
  }
  // [/shmreg-server-memory]
  // The server's own view of the memory, for the memsets it performs.
  auto* memory = static_cast<unsigned char*>(
      devices == 0 ? nullptr
                   : mmap(nullptr, capacity * devices, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0));
  if (memory == MAP_FAILED) {
    std::perror("shmreg-server: mmap");
    return 1;
  }
  std::vector<DeviceHeap> heaps;
  for (int d = 0; d < devices; ++d) heaps.emplace_back(d * capacity, capacity);
  auto heap_of = [&](std::uint64_t offset) -> DeviceHeap* {
    if (capacity == 0 || offset / capacity >= static_cast<std::uint64_t>(devices)) return nullptr;
    return &heaps[offset / capacity];
  };

  Request q;
  while (recv(sock, &q, sizeof q, 0) == static_cast<ssize_t>(sizeof q)) {
    Reply r{shmSuccess, 0, 0};
    int pass_fd = -1;
    switch (q.op) {
      case Op::Hello:
        r.a = static_cast<std::uint64_t>(devices);
        r.b = capacity;
        pass_fd = memfd;
        break;
      case Op::Malloc:
        if (q.device < 0 || q.device >= devices) {
          r.error = shmErrorInvalidDevice;
        } else if (!heaps[q.device].allocate(q.a, &r.a)) {
          r.error = shmErrorMemoryAllocation;
        }
        break;
      case Op::Free: {
        DeviceHeap* h = heap_of(q.a);
        if (h == nullptr || !h->release(q.a)) r.error = shmErrorInvalidDevicePointer;
        break;
      }
      case Op::Memset: {
        DeviceHeap* h = heap_of(q.a);
        std::uint64_t start = 0, size = 0;
        if (h == nullptr || !h->find(q.a, &start, &size) || q.a + q.c > start + size) {
          r.error = shmErrorInvalidValue;
        } else {
          std::memset(memory + q.a, static_cast<int>(q.b), q.c);
        }
        break;
      }
      case Op::Find: {
        DeviceHeap* h = heap_of(q.a);
        if (h == nullptr || !h->find(q.a, &r.a, &r.b)) r.error = shmErrorInvalidDevicePointer;
        break;
      }
      case Op::MemInfo:
        if (q.device < 0 || q.device >= devices) {
          r.error = shmErrorInvalidDevice;
        } else {
          r.a = heaps[q.device].free_bytes();
          r.b = heaps[q.device].capacity();
        }
        break;
      default:
        r.error = shmErrorInvalidValue;
    }
    if (!send_reply(sock, r, pass_fd)) break;
  }
  return 0;  // the client is gone: so is its device memory
}
