#include "copy_plan.h"

namespace openreg {
namespace {

bool is_device(const orPointerAttributes& a) { return a.type == orMemoryTypeDevice; }

// Known allocations (device or pinned) must contain the whole range; pageable memory
// cannot be checked.
bool range_ok(const orPointerAttributes& a, std::size_t count) {
  if (a.type == orMemoryTypeUnregistered) return true;
  if (a.base == nullptr) return false;  // inside an arena but not in a live block
  auto begin = static_cast<const char*>(a.pointer);
  auto end = static_cast<const char*>(a.base) + a.size;
  return static_cast<std::size_t>(end - begin) >= count;
}

}  // namespace

orError_t check_device_range(const orPointerAttributes& a, std::size_t count) {
  if (!is_device(a)) return orErrorInvalidValue;
  return range_ok(a, count) ? orSuccess : orErrorInvalidValue;
}

orError_t plan_copy(const orPointerAttributes& dst, const orPointerAttributes& src,
                    std::size_t count, orMemcpyKind kind, CopyPlan* plan) {
  const bool dst_dev = is_device(dst);
  const bool src_dev = is_device(src);
  orMemcpyKind inferred = dst_dev ? (src_dev ? orMemcpyDeviceToDevice : orMemcpyHostToDevice)
                                  : (src_dev ? orMemcpyDeviceToHost : orMemcpyHostToHost);
  switch (kind) {
    case orMemcpyHostToHost:
    case orMemcpyHostToDevice:
    case orMemcpyDeviceToHost:
    case orMemcpyDeviceToDevice:
      if (kind != inferred) return orErrorInvalidMemcpyDirection;
      break;
    case orMemcpyDefault:
      break;
    default:
      return orErrorInvalidMemcpyDirection;
  }
  if (count > 0 && (dst.pointer == nullptr || src.pointer == nullptr)) return orErrorInvalidValue;
  if (!range_ok(dst, count) || !range_ok(src, count)) return orErrorInvalidValue;
  *plan = CopyPlan{inferred,
                   dst_dev ? dst.device : -1,
                   src_dev ? src.device : -1,
                   dst.type == orMemoryTypeUnregistered,
                   src.type == orMemoryTypeUnregistered};
  return orSuccess;
}

}  // namespace openreg
