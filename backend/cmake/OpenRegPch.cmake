# Precompiled torch headers for the ATen layer (torch_openreg_aten) and the bindings.
#
# Included once, at the end of backend/CMakeLists.txt, after the targets exist.
# The PCH holds the ATen layer's prelude (OPENREG_ATEN_PRELUDE_HEADERS: Tensor,
# the dispatcher's library.h, TensorIterator, Dispatch.h, ...), parsed once
# per build dir instead of once per translation unit; the bindings reuse it
# (REUSE_FROM). Never torch/extension.h: a wider PCH costs every TU that loads
# it, and the runtime layer (c10 only) and the transport skip it.
#
# On by default only without unity sources (-DOPENREG_UNITY=OFF, the
# developer's configuration: ~30 TUs each parse the prelude). With them, two
# TUs would load it (the ATen layer's one unity source and the bindings) and
# it does not pay for itself: gcc spends more on writing the PCH (its state
# save and pointer sort: 9 of the PCH's 14 CPU-s, a 328 MB file) than on
# parsing the headers, and a PCH does not carry the deferred template
# instantiation every TU pays anyway. Measured 2026-12-06 in one run each:
# cold build 86.3 CPU-s with the PCH, 85.2 without (two ATen TUs then).
# The COMPAT feature tests (check_cxx_source_compiles) compile their own
# sources and never see these target properties.
if(OPENREG_UNITY)
  set(_openreg_pch_default OFF)
else()
  set(_openreg_pch_default ON)
endif()
option(OPENREG_PCH "precompile the common torch headers of the ATen layer and the bindings" ${_openreg_pch_default})
if(NOT OPENREG_PCH)
  return()
endif()

target_precompile_headers(torch_openreg_aten PRIVATE ${OPENREG_ATEN_PRELUDE_HEADERS})

# The bindings compile with the same ABI/PIC/standard/AT_PER_OPERATOR_HEADERS
# flags, so the ATen layer's PCH is valid for them (gcc checks, and CMake adds
# -Winvalid-pch so a mismatch shows as a warning, not a silent reparse). gcc
# rejects a PCH made with a macro the user does not define: the PCH is made
# in an OBJECT library, for which CMake defines no <target>_EXPORTS. gcc takes
# an -O1 PCH in an -O3 TU and the reverse (both define __OPTIMIZE__).
target_precompile_headers(torch_bindings REUSE_FROM torch_openreg_aten)

# ccache and gcc PCHs: ccache only caches a TU that uses a PCH when it is told
# the PCH's defines and __TIME__ may differ (sloppiness) and gcc leaves a
# marker of the PCH in the preprocessed output (-fpch-preprocess). Only for
# our targets, and only when the build uses ccache as its launcher.
foreach(_pch_target torch_openreg_aten torch_bindings)
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
