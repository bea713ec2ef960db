/* _qrt_module.c: an empty CPython extension module. It exists so that setuptools builds the
   runtime library (qrt_lib.c, linked into the same shared object) at install time;
   twin/runtime/native.py loads that object with ctypes. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static struct PyModuleDef qrt_module = {
    PyModuleDef_HEAD_INIT,
    "_qrt",
    "The qrt device runtime library (loaded with ctypes by twin.runtime.native).",
    -1,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__qrt(void)
{
    return PyModule_Create(&qrt_module);
}
