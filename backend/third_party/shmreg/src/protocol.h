// The wire format between libshmreg and shmreg-server: one fixed-size request
// and one fixed-size reply per SOCK_SEQPACKET message, strictly alternating.
#pragma once

#include <cstdint>

namespace shmreg {

// [shmreg-protocol]
enum class Op : std::uint32_t {
  Hello = 1,   // -> a = device count, b = bytes per device; the memfd rides along (SCM_RIGHTS)
  Malloc = 2,  // device, a = size -> a = offset in the memfd
  Free = 3,    // a = offset
  Memset = 4,  // a = offset, b = value, c = count
  Find = 5,    // a = offset -> a = allocation start, b = its size
  MemInfo = 6, // device -> a = free bytes, b = total bytes
};

struct Request {
  Op op;
  std::int32_t device;
  std::uint64_t a, b, c;
};

struct Reply {
  std::int32_t error;  // a shmError_t
  std::uint64_t a, b;
};
// [/shmreg-protocol]

// Allocations are aligned like CUDA's (and torch's expectations of device memory).
inline constexpr std::uint64_t kAlignment = 512;

}  // namespace shmreg
