// The process-wide window during which device memory is accessible.
//
// Device arenas are PROT_NONE so that host code dereferencing a device pointer
// crashes. Kernels and the runtime's own copies enter the gate; the first one in
// makes the used span of every arena READ|WRITE, the last one out revokes it.
// Everything is under one mutex so that nobody can start touching memory while a
// transition's mprotect is still in flight.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace openreg {

class Arena;

// Granularity of the exposed span: a 2 MiB huge page (a page multiple on any system).
inline constexpr std::size_t kExposureStep = std::size_t{2} << 20;

class AccessGate {
 public:
  explicit AccessGate(std::vector<Arena*> arenas);

  // false if the protection change failed (the caller must not touch device memory).
  bool enter();
  void leave();
  // An arena's used span grew: if the window is open, widen it so the new block is
  // accessible to kernels that are already running.
  void arena_grew();

  struct Stats {
    std::uint64_t opens;  // 0 -> 1 transitions
    std::uint64_t widenings;
  };
  Stats stats() const;

  class Scope {
   public:
    explicit Scope(AccessGate& gate) : gate_(gate), entered_(gate.enter()) {}
    ~Scope() {
      if (entered_) gate_.leave();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    bool entered() const { return entered_; }

   private:
    AccessGate& gate_;
    bool entered_;
  };

 private:
  bool expose_locked(std::size_t index);

  mutable std::mutex mu_;
  std::vector<Arena*> arenas_;
  std::vector<std::size_t> exposed_;  // bytes from each arena's base currently R/W
  std::uint64_t depth_ = 0;
  Stats stats_{0, 0};
};

}  // namespace openreg
