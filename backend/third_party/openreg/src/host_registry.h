// Pinned host memory handed out by orMallocHost, remembered so that pointer
// attributes (and therefore memcpy) can tell it from pageable memory.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>

namespace openreg {

class HostRegistry {
 public:
  struct Block {
    void* base;
    std::size_t size;
  };

  void* allocate(std::size_t size);  // nullptr on failure
  bool release(void* ptr);           // false if ptr is not a block start
  std::optional<Block> find(const void* ptr) const;

 private:
  mutable std::mutex mu_;
  std::map<const std::byte*, std::size_t> blocks_;  // base -> requested size
};

}  // namespace openreg
