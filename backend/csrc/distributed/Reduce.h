// Elementwise reductions of the occl collectives, run by the transport on
// device memory straight out of shared-memory slots (inside a device kernel,
// so device memory is accessible).
#pragma once

#include <c10/core/ScalarType.h>

#include <cstddef>

#include "distributed/ShmTransport.h"

namespace openreg::distributed {

enum class ReduceKind { Sum, Avg, Product, Min, Max };

// dst[i] = dst[i] op src[i]; Avg reduces like Sum (divide_by finishes it).
// Throws for a dtype/op pair occl does not support.
ReduceFn make_reduce(c10::ScalarType dtype, ReduceKind kind);

// data[i] /= divisor, for ReduceOp.AVG after the sum (floating types only).
void divide_by(void* data, size_t bytes, c10::ScalarType dtype, int divisor);

} // namespace openreg::distributed
