#include "config.h"
#include "page.h"


#include <cerrno>
#include <cstdlib>
#include <limits>

namespace openreg {
namespace {

std::optional<unsigned long long> parse_decimal(const char* text) {
  if (text == nullptr || *text < '0' || *text > '9') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return value;
}

}  // namespace

std::optional<int> parse_device_count(const char* text) {
  auto value = parse_decimal(text);
  if (!value || *value > static_cast<unsigned long long>(kMaxDeviceCount)) return std::nullopt;
  return static_cast<int>(*value);
}

std::optional<std::size_t> parse_device_memory(const char* text) {
  auto value = parse_decimal(text);
  const std::size_t page = page_size();
  // Zero would make every allocation fail; leave room so rounding up cannot overflow.
  if (!value || *value == 0 || *value > std::numeric_limits<std::size_t>::max() / 2) {
    return std::nullopt;
  }
  return (static_cast<std::size_t>(*value) + page - 1) / page * page;
}

const Config& config() {
  static const Config cfg{
      parse_device_count(std::getenv("OPENREG_DEVICE_COUNT")).value_or(kDefaultDeviceCount),
      parse_device_memory(std::getenv("OPENREG_DEVICE_MEMORY")).value_or(kDefaultDeviceMemory),
  };
  return cfg;
}

}  // namespace openreg
