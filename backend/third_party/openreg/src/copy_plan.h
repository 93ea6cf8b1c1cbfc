// Checking a memcpy/memset request against what the runtime knows about its pointers.
#pragma once

#include <cstddef>

#include "openreg.h"

namespace openreg {

struct CopyPlan {
  orMemcpyKind kind;  // never orMemcpyDefault
  int dst_device;     // -1 for host memory
  int src_device;
  bool dst_pageable;  // plain host memory the runtime does not know
  bool src_pageable;
  bool touches_device() const { return dst_device >= 0 || src_device >= 0; }
};

// orErrorInvalidMemcpyDirection if `kind` contradicts the pointers, orErrorInvalidValue
// if a known allocation is overrun or a device pointer is not inside a live block.
orError_t plan_copy(const orPointerAttributes& dst, const orPointerAttributes& src,
                    std::size_t count, orMemcpyKind kind, CopyPlan* plan);

// The range [attributes.pointer, +count) must lie in one live device allocation.
orError_t check_device_range(const orPointerAttributes& attributes, std::size_t count);

}  // namespace openreg
