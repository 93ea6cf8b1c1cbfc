// One device's memory: a PROT_NONE reservation of virtual address space and a
// best-fit allocator with a coalescing free list inside it.
#pragma once

#include <atomic>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

namespace openreg {

inline constexpr std::size_t kAllocationAlignment = 512;
// Freed blocks at least this large give their pages back to the OS.
inline constexpr std::size_t kReleaseToOsThreshold = std::size_t{1} << 20;

class Arena {
 public:
  struct Block {
    void* base;
    std::size_t size;  // as requested by the caller
  };

  // Reserves `capacity` bytes (page multiple). If the reservation fails the arena
  // stays empty and every allocation fails.
  explicit Arena(std::size_t capacity);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // nullptr if there is no free block large enough. `grew_high_water` tells the caller
  // that the span in use was extended (so an open access window must be widened).
  void* allocate(std::size_t size, bool* grew_high_water);
  // false if `ptr` is not the start of a live allocation.
  bool release(void* ptr);
  // The live allocation containing `ptr` (interior pointers included).
  std::optional<Block> find(const void* ptr) const;

  bool contains(const void* ptr) const {
    auto p = static_cast<const std::byte*>(ptr);
    return base_ != nullptr && p >= base_ && p < base_ + capacity_;
  }
  std::byte* base() const { return base_; }
  std::size_t capacity() const { return base_ ? capacity_ : 0; }
  std::size_t used_bytes() const;
  // End offset of the highest live allocation: [base, base + high_water) is the span
  // that must be accessible while kernels run. Lowered when the tail is freed.
  std::size_t high_water() const { return high_water_.load(std::memory_order_acquire); }

 private:
  void insert_free(std::size_t offset, std::size_t size);
  void erase_free(std::map<std::size_t, std::size_t>::iterator it);
  void update_high_water();
  void release_pages(std::size_t offset, std::size_t size);

  std::byte* base_ = nullptr;
  std::size_t capacity_ = 0;

  mutable std::mutex mu_;
  std::map<std::size_t, std::size_t> free_by_offset_;            // offset -> size
  std::set<std::pair<std::size_t, std::size_t>> free_by_size_;   // (size, offset)
  struct Live {
    std::size_t reserved;   // rounded size held in the arena
    std::size_t requested;  // size reported by find()
  };
  std::map<std::size_t, Live> live_;  // offset -> sizes
  std::size_t used_ = 0;
  std::atomic<std::size_t> high_water_{0};
};

}  // namespace openreg
