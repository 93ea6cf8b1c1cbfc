# Imported targets for the torch installed in the interpreter that drives the
# build. setup.py passes TORCH_INCLUDE_DIRS / TORCH_LIBRARY_DIRS / TORCH_VERSION /
# TORCH_CXX11_ABI; when configuring by hand, pass -DPython_EXECUTABLE=... and the
# same values are asked from that interpreter.
if(NOT TORCH_INCLUDE_DIRS OR NOT TORCH_LIBRARY_DIRS OR NOT TORCH_VERSION)
  if(NOT Python_EXECUTABLE)
    find_program(Python_EXECUTABLE NAMES python3 python REQUIRED)
  endif()
  execute_process(
    COMMAND ${Python_EXECUTABLE} -c
      "import torch, torch.utils.cpp_extension as e; print(';'.join(e.include_paths())); print(';'.join(e.library_paths())); print(torch.__version__); print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"
    OUTPUT_VARIABLE _torch_info
    RESULT_VARIABLE _torch_rc
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _torch_rc EQUAL 0)
    message(FATAL_ERROR "torch_openreg: cannot import torch with ${Python_EXECUTABLE}")
  endif()
  string(REPLACE "\n" ";" _torch_lines "${_torch_info}")
  list(GET _torch_lines 0 _inc)
  list(GET _torch_lines 1 _lib)
  list(GET _torch_lines 2 TORCH_VERSION)
  list(GET _torch_lines 3 TORCH_CXX11_ABI)
  string(REPLACE "," ";" TORCH_INCLUDE_DIRS "${_inc}")
  string(REPLACE "," ";" TORCH_LIBRARY_DIRS "${_lib}")
endif()

if(NOT DEFINED TORCH_CXX11_ABI)
  set(TORCH_CXX11_ABI 1)
endif()

message(STATUS "torch_openreg: building against torch ${TORCH_VERSION} (_GLIBCXX_USE_CXX11_ABI=${TORCH_CXX11_ABI})")
message(STATUS "torch_openreg: torch include dirs: ${TORCH_INCLUDE_DIRS}")
message(STATUS "torch_openreg: torch library dirs: ${TORCH_LIBRARY_DIRS}")

# Python headers for the stub module (the only C target that includes Python.h
# apart from the bindings, which get them through torch_python's include dirs).
if(NOT OPENREG_PYTHON_INCLUDE_DIR OR NOT OPENREG_PYTHON_EXT_SUFFIX)
  find_package(Python REQUIRED COMPONENTS Interpreter Development.Module)
  set(OPENREG_PYTHON_INCLUDE_DIR ${Python_INCLUDE_DIRS})
  execute_process(COMMAND ${Python_EXECUTABLE} -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"
    OUTPUT_VARIABLE OPENREG_PYTHON_EXT_SUFFIX OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()

function(_openreg_find_torch_lib out name)
  find_library(${out} NAMES ${name} PATHS ${TORCH_LIBRARY_DIRS} NO_DEFAULT_PATH)
  if(NOT ${out})
    message(FATAL_ERROR "torch_openreg: lib${name} not found in ${TORCH_LIBRARY_DIRS} (torch ${TORCH_VERSION})")
  endif()
endfunction()

_openreg_find_torch_lib(OPENREG_LIB_C10 c10)
_openreg_find_torch_lib(OPENREG_LIB_TORCH_CPU torch_cpu)
_openreg_find_torch_lib(OPENREG_LIB_TORCH torch)
_openreg_find_torch_lib(OPENREG_LIB_TORCH_PYTHON torch_python)

add_library(openreg::torch INTERFACE IMPORTED)
set_target_properties(openreg::torch PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${TORCH_INCLUDE_DIRS}"
  INTERFACE_LINK_LIBRARIES "${OPENREG_LIB_C10};${OPENREG_LIB_TORCH_CPU};${OPENREG_LIB_TORCH}"
  INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=${TORCH_CXX11_ABI}")

add_library(openreg::torch_python INTERFACE IMPORTED)
set_target_properties(openreg::torch_python PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${OPENREG_PYTHON_INCLUDE_DIR}"
  INTERFACE_LINK_LIBRARIES "openreg::torch;${OPENREG_LIB_TORCH_PYTHON}")
