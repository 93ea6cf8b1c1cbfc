#include "access_gate.h"

#include <sys/mman.h>

#include <algorithm>
#include <utility>

#include "arena.h"

namespace openreg {

AccessGate::AccessGate(std::vector<Arena*> arenas)
    : arenas_(std::move(arenas)), exposed_(arenas_.size(), 0) {}

bool AccessGate::expose_locked(std::size_t i) {
  // mprotect needs page-aligned starts, and a boundary inside a 2 MiB huge page would
  // split it: expose whole huge-page-sized steps (free arena space, never foreign).
  const std::size_t used = arenas_[i]->high_water();
  if (used <= exposed_[i]) return true;
  const std::size_t want =
      std::min((used + kExposureStep - 1) / kExposureStep * kExposureStep, arenas_[i]->capacity());
  std::byte* base = arenas_[i]->base();
  if (mprotect(base + exposed_[i], want - exposed_[i], PROT_READ | PROT_WRITE) != 0) {
    return false;
  }
  exposed_[i] = want;
  return true;
}

bool AccessGate::enter() {
  std::lock_guard<std::mutex> lock(mu_);
  if (depth_ == 0) {
    for (std::size_t i = 0; i < arenas_.size(); ++i) {
      if (!expose_locked(i)) {
        // Roll back so that a failed open leaves everything protected.
        for (std::size_t j = 0; j <= i; ++j) {
          if (exposed_[j] != 0) mprotect(arenas_[j]->base(), exposed_[j], PROT_NONE);
          exposed_[j] = 0;
        }
        return false;
      }
    }
    ++stats_.opens;
  }
  ++depth_;
  return true;
}

void AccessGate::leave() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--depth_ != 0) return;
  for (std::size_t i = 0; i < arenas_.size(); ++i) {
    if (exposed_[i] == 0) continue;
    mprotect(arenas_[i]->base(), exposed_[i], PROT_NONE);
    exposed_[i] = 0;
  }
}

void AccessGate::arena_grew() {
  std::lock_guard<std::mutex> lock(mu_);
  if (depth_ == 0) return;
  for (std::size_t i = 0; i < arenas_.size(); ++i) {
    const std::size_t before = exposed_[i];
    // A failure here leaves the new block protected: a kernel touching it faults,
    // which is loud rather than silently wrong.
    expose_locked(i);
    if (exposed_[i] != before) ++stats_.widenings;
  }
}

AccessGate::Stats AccessGate::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace openreg
