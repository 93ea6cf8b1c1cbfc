// The device arena allocator, pointer attributes and pinned host memory.
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <thread>
#include <vector>

#include "../src/arena.h"
#include "check.h"

OR_TEST(malloc_is_aligned_and_attributes_describe_the_block) {
  void* a = nullptr;
  void* b = nullptr;
  CHECK_OK(orMalloc(&a, 1));
  CHECK_OK(orMalloc(&b, 1000));
  CHECK(a != nullptr && b != nullptr && a != b);
  CHECK_EQ(reinterpret_cast<std::uintptr_t>(a) % 512, std::uintptr_t{0});
  CHECK_EQ(reinterpret_cast<std::uintptr_t>(b) % 512, std::uintptr_t{0});

  orPointerAttributes at{};
  CHECK_OK(orPointerGetAttributes(&at, static_cast<char*>(b) + 999));
  CHECK_EQ(at.type, orMemoryTypeDevice);
  CHECK_EQ(at.device, 0);
  CHECK(at.base == b);
  CHECK_EQ(at.size, std::size_t{1000});
  CHECK(at.pointer == static_cast<char*>(b) + 999);

  // Just past the requested size is not part of the allocation.
  CHECK_OK(orPointerGetAttributes(&at, static_cast<char*>(b) + 1000));
  CHECK_EQ(at.type, orMemoryTypeDevice);
  CHECK(at.base == nullptr);

  int on_stack = 0;
  CHECK_OK(orPointerGetAttributes(&at, &on_stack));
  CHECK_EQ(at.type, orMemoryTypeUnregistered);
  CHECK_EQ(at.device, -1);
  CHECK(at.base == nullptr);
  CHECK_ERR(orPointerGetAttributes(nullptr, a), orErrorInvalidValue);

  CHECK_OK(orFree(a));
  CHECK_OK(orFree(b));
}

OR_TEST(malloc_on_second_device_reports_that_device) {
  int n = 0;
  orGetDeviceCount(&n);
  if (n < 2) return;
  CHECK_OK(orSetDevice(1));
  void* p = nullptr;
  CHECK_OK(orMalloc(&p, 4096));
  orPointerAttributes at{};
  CHECK_OK(orPointerGetAttributes(&at, p));
  CHECK_EQ(at.device, 1);
  CHECK_OK(orFree(p));
  CHECK_OK(orSetDevice(0));
}

OR_TEST(free_rejects_foreign_interior_and_double_frees) {
  int x = 0;
  CHECK_ERR(orFree(&x), orErrorInvalidDevicePointer);
  void* p = nullptr;
  CHECK_OK(orMalloc(&p, 4096));
  CHECK_ERR(orFree(static_cast<char*>(p) + 512), orErrorInvalidDevicePointer);
  CHECK_OK(orFree(p));
  CHECK_ERR(orFree(p), orErrorInvalidDevicePointer);
  CHECK_OK(orFree(nullptr));
  void* z = &x;
  CHECK_OK(orMalloc(&z, 0));
  CHECK(z == nullptr);
  CHECK_ERR(orMalloc(nullptr, 16), orErrorInvalidValue);
}

OR_TEST(mem_get_info_tracks_allocations) {
  size_t free0 = 0, total = 0;
  CHECK_OK(orMemGetInfo(&free0, &total));
  CHECK(total > 0 && free0 <= total);
  void* p = nullptr;
  CHECK_OK(orMalloc(&p, 1 << 20));
  size_t free1 = 0;
  CHECK_OK(orMemGetInfo(&free1, &total));
  CHECK_EQ(free0 - free1, std::size_t{1} << 20);
  CHECK_OK(orFree(p));
  CHECK_OK(orMemGetInfo(&free1, &total));
  CHECK_EQ(free1, free0);
}

OR_TEST(out_of_arena_is_an_error_not_a_crash) {
  size_t free_bytes = 0, total = 0;
  CHECK_OK(orMemGetInfo(&free_bytes, &total));
  void* p = reinterpret_cast<void*>(0x1);
  CHECK_ERR(orMalloc(&p, total + 1), orErrorMemoryAllocation);
  CHECK(p == nullptr);
  CHECK_ERR(orMalloc(&p, SIZE_MAX), orErrorMemoryAllocation);
}

OR_TEST(arena_coalesces_and_reuses_freed_space) {
  openreg::Arena arena(1 << 20);
  bool grew = false;
  // Fill the arena with 4 blocks, free the middle two, and a block of their joint
  // size must fit exactly there (only possible if the neighbours were merged).
  void* b[4];
  for (auto& p : b) {
    p = arena.allocate(256 << 10, &grew);
    CHECK(p != nullptr);
  }
  bool dummy = false;
  CHECK(arena.allocate(1, &dummy) == nullptr);  // full
  CHECK(arena.release(b[1]));
  CHECK(arena.release(b[2]));
  void* joined = arena.allocate(512 << 10, &grew);
  CHECK(joined == b[1]);
  CHECK(!grew);
  CHECK(!arena.release(static_cast<char*>(joined) + 512));
  CHECK(arena.release(joined));
  CHECK(arena.release(b[0]));
  CHECK(arena.release(b[3]));
  CHECK_EQ(arena.used_bytes(), std::size_t{0});
  CHECK_EQ(arena.high_water(), std::size_t{0});
  // Everything merged back into one block: the whole arena is allocatable again.
  CHECK(arena.allocate(1 << 20, &grew) == b[0]);
}

OR_TEST(arena_matches_a_reference_model_under_random_traffic) {
  // Random allocate/free against a model: blocks never overlap, stay aligned and in
  // bounds, used_bytes/high_water agree with the model, and freeing everything
  // coalesces back into one block spanning the arena.
  const std::size_t capacity = std::size_t{8} << 20;
  openreg::Arena arena(capacity);
  std::map<std::uintptr_t, std::size_t> live;  // base -> rounded size
  std::uint64_t rng = 12345;
  auto next = [&rng] {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  };
  const auto base = reinterpret_cast<std::uintptr_t>(arena.base());
  bool ok = true;
  for (int step = 0; step < 20000 && ok; ++step) {
    if (live.empty() || next() % 100 < 55) {
      const std::size_t size = 1 + next() % (next() % 10 == 0 ? (1 << 20) : 8192);
      bool grew = false;
      void* p = arena.allocate(size, &grew);
      if (p == nullptr) continue;  // full or fragmented: allowed
      const auto a = reinterpret_cast<std::uintptr_t>(p);
      const std::size_t rounded = (size + 511) / 512 * 512;
      ok = ok && a % 512 == 0 && a >= base && a + rounded <= base + capacity;
      auto after = live.lower_bound(a);
      if (after != live.end()) ok = ok && a + rounded <= after->first;
      if (after != live.begin()) ok = ok && std::prev(after)->first + std::prev(after)->second <= a;
      auto found = arena.find(reinterpret_cast<void*>(a + size - 1));
      ok = ok && found && found->base == p && found->size == size;
      live.emplace(a, rounded);
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(next() % live.size()));
      ok = ok && arena.release(reinterpret_cast<void*>(it->first));
      live.erase(it);
    }
    std::size_t used = 0;
    for (auto& [a, n] : live) used += n;
    const std::size_t hw = live.empty() ? 0 : live.rbegin()->first + live.rbegin()->second - base;
    ok = ok && arena.used_bytes() == used && arena.high_water() == hw;
  }
  CHECK(ok);
  for (auto& [a, n] : live) CHECK(arena.release(reinterpret_cast<void*>(a)));
  bool grew = false;
  CHECK(arena.allocate(capacity, &grew) == arena.base());
}

OR_TEST(arena_high_water_follows_the_tail) {
  openreg::Arena arena(1 << 20);
  bool grew = false;
  void* a = arena.allocate(1000, &grew);
  CHECK(grew);
  CHECK_EQ(arena.high_water(), std::size_t{1024});
  void* b = arena.allocate(512, &grew);
  CHECK(grew);
  CHECK_EQ(arena.high_water(), std::size_t{1536});
  CHECK(arena.release(b));
  CHECK_EQ(arena.high_water(), std::size_t{1024});
  CHECK(arena.release(a));
  CHECK_EQ(arena.high_water(), std::size_t{0});
}

OR_TEST(large_free_returns_pages_to_the_os) {
  openreg::Arena arena(std::size_t{64} << 20);
  bool grew = false;
  const std::size_t size = std::size_t{8} << 20;
  auto* p = static_cast<unsigned char*>(arena.allocate(size, &grew));
  CHECK(p != nullptr);
  mprotect(arena.base(), size, PROT_READ | PROT_WRITE);
  std::memset(p, 0xAB, size);
  std::vector<unsigned char> resident(size / 4096);
  mincore(p, size, resident.data());
  CHECK((resident[0] & 1) != 0);
  CHECK(arena.release(p));
  mincore(p, size, resident.data());
  std::size_t still = 0;
  for (unsigned char r : resident) still += r & 1;
  CHECK_EQ(still, std::size_t{0});
  mprotect(arena.base(), size, PROT_NONE);
}

OR_TEST(concurrent_malloc_free_never_hands_out_overlapping_blocks) {
  std::vector<std::vector<std::pair<std::uintptr_t, std::size_t>>> kept(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &kept] {
      std::vector<std::pair<void*, std::size_t>> live;
      for (int i = 0; i < 2000; ++i) {
        void* p = nullptr;
        const std::size_t size = 100 + 512 * static_cast<std::size_t>((i * 7 + t) % 9);
        if (orMalloc(&p, size) == orSuccess) live.push_back({p, size});
        if (i % 3 == 2) {
          orFree(live.front().first);
          live.erase(live.begin());
        }
      }
      for (auto [p, size] : live) kept[t].push_back({reinterpret_cast<std::uintptr_t>(p), size});
    });
  }
  for (auto& th : threads) th.join();
  std::vector<std::pair<std::uintptr_t, std::size_t>> all;
  for (auto& k : kept) all.insert(all.end(), k.begin(), k.end());
  std::sort(all.begin(), all.end());
  for (std::size_t i = 1; i < all.size(); ++i) {
    CHECK(all[i - 1].first + all[i - 1].second <= all[i].first);
  }
  for (auto [p, size] : all) CHECK_OK(orFree(reinterpret_cast<void*>(p)));
  size_t free_bytes = 0, total = 0;
  CHECK_OK(orMemGetInfo(&free_bytes, &total));
  CHECK_EQ(free_bytes, total);  // everything came back
}

OR_TEST(pinned_host_memory_is_known_to_the_runtime) {
  void* h = nullptr;
  CHECK_OK(orMallocHost(&h, 10000));
  CHECK(h != nullptr);
  std::memset(h, 1, 10000);  // ordinary host memory: accessible
  orPointerAttributes at{};
  CHECK_OK(orPointerGetAttributes(&at, static_cast<char*>(h) + 9999));
  CHECK_EQ(at.type, orMemoryTypeHost);
  CHECK_EQ(at.device, -1);
  CHECK(at.base == h);
  CHECK_EQ(at.size, std::size_t{10000});
  CHECK_ERR(orFreeHost(static_cast<char*>(h) + 1), orErrorInvalidValue);
  CHECK_OK(orFreeHost(h));
  CHECK_OK(orPointerGetAttributes(&at, h));
  CHECK_EQ(at.type, orMemoryTypeUnregistered);
  CHECK_ERR(orFreeHost(h), orErrorInvalidValue);
}

OR_TEST_MAIN()
