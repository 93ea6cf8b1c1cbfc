# Precompiled torch headers for libtorch_openreg and its bindings.
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
target_precompile_headers(torch_openreg PRIVATE ${OPENREG_PCH_HEADERS})

# c10-only sources of the ATen-layer target: loading the PCH would cost them
# more than it saves (gcc instantiates the PCH's pending templates in every TU).
# With OPENREG_UNITY they are one unity group, `transport` (the generated file
# is named by CMake: <target>.dir/Unity/unity_<group>_cxx.cxx).
set_source_files_properties(
  ${_csrc}/distributed/Reduce.cpp ${_csrc}/distributed/ShmTransport.cpp
  ${CMAKE_CURRENT_BINARY_DIR}/CMakeFiles/torch_openreg.dir/Unity/unity_transport_cxx.cxx
  TARGET_DIRECTORY torch_openreg PROPERTIES SKIP_PRECOMPILE_HEADERS ON)

# The bindings compile with the same ABI/PIC/standard/AT_PER_OPERATOR_HEADERS
# flags, so torch_openreg's PCH is valid for them (gcc checks, and CMake adds
# -Winvalid-pch so a mismatch shows as a warning, not a silent reparse). gcc
# rejects a PCH made with a macro the user does not define, and CMake defines
# torch_openreg_EXPORTS for the library's sources: nothing of ours reads it.
set_target_properties(torch_openreg PROPERTIES DEFINE_SYMBOL "")
target_precompile_headers(torch_bindings REUSE_FROM torch_openreg)

# ccache and gcc PCHs: ccache only caches a TU that uses a PCH when it is told
# the PCH's defines and __TIME__ may differ (sloppiness) and gcc leaves a
# marker of the PCH in the preprocessed output (-fpch-preprocess). Only for
# our targets, and only when the build uses ccache as its launcher.
foreach(_pch_target torch_openreg torch_bindings)
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
