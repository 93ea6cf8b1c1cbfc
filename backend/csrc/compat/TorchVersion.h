// Version switches for the PyTorch releases this tree builds against.
//
// Every branch on these macros is annotated
//   COMPAT(>= X.Y): <upstream change, PR #>  -- CAN REMOVE when MIN_SUPPORTED >= X.Y
// so that raising MIN_SUPPORTED is a grep away.
#pragma once

#include <torch/version.h>

// The oldest release the tree builds against. Verified, suite green, on 2.9.1,
// 2.10.0, 2.11.0, 2.12.1, 2.13.0 and 2.14.1 (backend/docs/compat.md).
#define OPENREG_MIN_SUPPORTED_MAJOR 2
#define OPENREG_MIN_SUPPORTED_MINOR 9

#define OPENREG_TORCH_VERSION_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||                  \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if !OPENREG_TORCH_VERSION_AT_LEAST(OPENREG_MIN_SUPPORTED_MAJOR, OPENREG_MIN_SUPPORTED_MINOR)
#error "torch_openreg needs torch >= 2.9 (c10::DeviceAllocator, PrivateUse1 hooks with deviceCount)"
#endif
