# Precompiled torch headers for libtorch_openreg (kernels and glue) and its bindings.
#
# Included once, at the end of backend/CMakeLists.txt, after the targets exist.
# Every ATen-layer translation unit parses the same torch headers (Tensor, the
# dispatcher's library.h, TensorIterator, Dispatch.h); they are parsed once per
# build into one PCH, which the bindings reuse (REUSE_FROM) instead of parsing
# them a second time. -DOPENREG_PCH=OFF builds without any PCH.
#
# Only the narrow headers our sources include themselves are in it, never
# torch/extension.h: a wider PCH costs every TU that loads it, and the
# runtime layer (c10 only) and the c10-only distributed transport skip it.
# The COMPAT feature tests (check_cxx_source_compiles) compile their own
# sources and never see these target properties.
option(OPENREG_PCH "precompile the common torch headers of libtorch_openreg and the bindings" ON)
if(NOT OPENREG_PCH)
  return()
endif()

# The torch headers that more than one ATen-layer group includes (see the
# unity groups in CMakeLists.txt). A header only one TU needs stays out.
set(OPENREG_PCH_HEADERS
  <ATen/core/Tensor.h>
  <torch/library.h>
  <ATen/Dispatch.h>
  <ATen/TensorIterator.h>
  <ATen/ExpandUtils.h>
  <ATen/native/Resize.h>
  <ATen/native/CPUFallback.h>
  <ATen/ops/empty.h>
  <c10/core/Scalar.h>
  <c10/core/DeviceGuard.h>)
target_precompile_headers(torch_openreg_kernels PRIVATE ${OPENREG_PCH_HEADERS})

# The c10-only transport (torch_openreg_transport) and the runtime layer do
# not use it: loading the PCH would cost them more than it saves (gcc
# instantiates the PCH's pending templates in every TU).

# The bindings compile with the same ABI/PIC/standard/AT_PER_OPERATOR_HEADERS
# flags, so the kernels' PCH is valid for them (gcc checks, and CMake adds
# -Winvalid-pch so a mismatch shows as a warning, not a silent reparse). gcc
# rejects a PCH made with a macro the user does not define: the PCH is made
# in an OBJECT library, for which CMake defines no <target>_EXPORTS.
target_precompile_headers(torch_bindings REUSE_FROM torch_openreg_kernels)
# The glue (-O1) too: gcc takes an -O3 PCH in an -O1 TU (both define
# __OPTIMIZE__; -Winvalid-pch would say otherwise).
target_precompile_headers(torch_openreg_glue REUSE_FROM torch_openreg_kernels)

# ccache and gcc PCHs: ccache only caches a TU that uses a PCH when it is told
# the PCH's defines and __TIME__ may differ (sloppiness) and gcc leaves a
# marker of the PCH in the preprocessed output (-fpch-preprocess). Only for
# our targets, and only when the build uses ccache as its launcher.
foreach(_pch_target torch_openreg_kernels torch_openreg_glue torch_bindings)
  get_target_property(_launcher ${_pch_target} CXX_COMPILER_LAUNCHER)
  if(_launcher)
    list(GET _launcher 0 _launcher_exe)
    get_filename_component(_launcher_name "${_launcher_exe}" NAME)
    if(_launcher_name STREQUAL "ccache")
      set_target_properties(${_pch_target} PROPERTIES CXX_COMPILER_LAUNCHER
        "${CMAKE_COMMAND};-E;env;CCACHE_SLOPPINESS=pch_defines,time_macros;${_launcher}")
      target_compile_options(${_pch_target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fpch-preprocess>)
    endif()
  endif()
endforeach()
