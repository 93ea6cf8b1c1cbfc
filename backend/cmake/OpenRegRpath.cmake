# Every library finds its neighbours relative to itself ($ORIGIN), so the
# installed package works from any prefix. torch's own libraries need no rpath
# entry at all: `import torch` has loaded libc10/libtorch* before torch_openreg
# is imported, and the loader resolves a DT_NEEDED soname against already
# loaded objects. The relative site-packages path is only a fallback for C++
# consumers that dlopen libtorch_openreg without Python.
function(openreg_set_package_rpath target origin)
  set_target_properties(${target} PROPERTIES
    BUILD_WITH_INSTALL_RPATH ON
    INSTALL_RPATH "${origin};${origin}/../../torch/lib;${origin}/../torch/lib")
endfunction()
