// The system page size: the unit of device-memory protection and of arena rounding.
#pragma once

#include <unistd.h>

#include <cstddef>

namespace openreg {

inline std::size_t page_size() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

}  // namespace openreg
