#pragma once

// The second core of the emulated device: one process-wide thread that joins
// kernels' parallel_range calls.
//
// torch's CPU kernels run on OpenMP threads that spin for a while after each
// parallel region, so back-to-back ops find them awake. A helper that sleeps
// between kernels takes tens of microseconds to wake on a virtual machine,
// which is the whole run time of a 1M-element reduction. This helper spins
// for a short while after each job before it blocks.

#include <functional>

namespace openreg::native {

// Hands job to the helper thread. Returns false without running it when the
// helper is busy with another kernel's job (several streams may run kernels at
// once) or could not be started; the caller then does the work itself. The
// job must tolerate running late or never: parallel_range's claim protocol does.
bool offer_to_chunk_helper(std::function<void()> job);

} // namespace openreg::native
