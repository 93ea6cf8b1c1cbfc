// State that belongs to a host thread rather than to the runtime.
#pragma once

namespace openreg {

// The device selected with orSetDevice on this thread (initially 0). Stream worker
// threads start on their stream's device.
int& current_device();

}  // namespace openreg
