#pragma once

namespace openreg::profiler {

// Whether this build registered the Kineto activity profiler (torch >= 2.13
// built with Kineto); otherwise only the ProfilerStubs fallback times ops.
bool has_activity_profiler();

}  // namespace openreg::profiler
