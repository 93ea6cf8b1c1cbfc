#include "host_registry.h"

#include <sys/mman.h>

namespace openreg {

void* HostRegistry::allocate(std::size_t size) {
  // Own mappings (not malloc) so that no pinned block can share a page with heap
  // data, as with page-locked memory.
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  blocks_.emplace(static_cast<const std::byte*>(p), size);
  return p;
}

bool HostRegistry::release(void* ptr) {
  std::size_t size = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(static_cast<const std::byte*>(ptr));
    if (it == blocks_.end()) return false;
    size = it->second;
    blocks_.erase(it);
  }
  munmap(ptr, size);
  return true;
}

std::optional<HostRegistry::Block> HostRegistry::find(const void* ptr) const {
  auto p = static_cast<const std::byte*>(ptr);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.upper_bound(p);
  if (it == blocks_.begin()) return std::nullopt;
  --it;
  if (p >= it->first + it->second) return std::nullopt;
  return Block{const_cast<std::byte*>(it->first), it->second};
}

}  // namespace openreg
