// The safety net: run any operator without an openreg kernel on the CPU.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace openreg::fallback {

// Boxed kernel: checks devices, routes random ops to the openreg generator's
// CPU engine, then moves tensors to the CPU, runs the CPU kernel and copies
// results and in-place mutations back (at::native::cpu_fallback).
// Usable for per-op registrations: makeFromBoxedFunction<&cpu_fallback>().
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

} // namespace openreg::fallback
