// Runtime configuration read from the environment once per process.
#pragma once

#include <cstddef>
#include <optional>

namespace openreg {

inline constexpr int kDefaultDeviceCount = 2;
// Each device reserves an arena of this much virtual address space; with 64 devices
// of 16 GiB that is 1 TiB, comfortably inside a 47-bit user address space.
inline constexpr int kMaxDeviceCount = 64;
inline constexpr std::size_t kDefaultDeviceMemory = std::size_t{16} << 30;

struct Config {
  int device_count;
  std::size_t device_memory;  // bytes per device, page aligned
};

// Parsers are separate from the getenv() so tests can feed them strings. They return
// nullopt for anything that is not a plain in-range decimal number.
std::optional<int> parse_device_count(const char* text);
std::optional<std::size_t> parse_device_memory(const char* text);

// OPENREG_DEVICE_COUNT / OPENREG_DEVICE_MEMORY, invalid values fall back to defaults.
// Computed on first use and cached, so it is also safe to call in a forked child.
const Config& config();

}  // namespace openreg
