# Every library finds its neighbours relative to itself, and torch's libraries
# through the rpath of the torch it was built against, so an installed package
# works from any prefix. torch/lib is also reachable at runtime because `import
# torch` loads libc10 & co. before torch_openreg is imported.
function(openreg_set_package_rpath target origin)
  set(_rpath "${origin}")
  foreach(_dir ${TORCH_LIBRARY_DIRS})
    list(APPEND _rpath "${_dir}")
  endforeach()
  set_target_properties(${target} PROPERTIES
    BUILD_WITH_INSTALL_RPATH ON
    INSTALL_RPATH "${_rpath}"
    SKIP_BUILD_RPATH OFF)
endfunction()
