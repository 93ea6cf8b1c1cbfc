// libshmreg's process-wide state: the connection to the server and the
// mapping of device memory. Used by client.cpp (memory) and streams.cpp.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "protocol.h"
#include "shmreg.h"

namespace shmreg {

class Client {
 public:
  // The client of this process, connected on first use. Errors: the server
  // could not start (shmErrorInitializationError), or this is a child forked
  // after the parent connected (the same error: it must not share the
  // parent's connection and memory bookkeeping).
  static shmError_t get(Client** out);

  // One request/reply with the server; shmErrorServerGone once it is gone.
  shmError_t call(const Request& q, Reply* r);

  int device_count() const { return devices_; }
  std::uint64_t capacity() const { return capacity_; }
  pid_t server_pid() const { return server_pid_; }
  unsigned char* base() const { return base_; }
  // The device whose memory holds `p`, or -1 for a host pointer.
  int device_of(const void* p) const;
  std::uint64_t offset_of(const void* p) const { return static_cast<const unsigned char*>(p) - base_; }

 private:
  shmError_t connect();

  pid_t owner_pid_ = 0;
  pid_t server_pid_ = 0;
  int sock_ = -1;
  int devices_ = 0;
  std::uint64_t capacity_ = 0;
  unsigned char* base_ = nullptr;
  std::mutex call_mu_;  // one request in flight: replies are not tagged
  bool gone_ = false;   // guarded by call_mu_
};

// Sizes, from the environment (read once): the client tells the server.
struct Config {
  int devices;
  std::uint64_t capacity;  // bytes per device
};
const Config& config();

// The calling thread's current device.
int& current_device();

}  // namespace shmreg
