/* The extension module proper. It only forwards to libtorch_bindings so that
 * the module file stays tiny and every real symbol lives in a normal shared
 * library other C++ code can link against. */
#include <Python.h>

extern PyObject* openreg_init_module(void);

PyMODINIT_FUNC PyInit__C(void) {
  return openreg_init_module();
}
