//===- Errors.h - memopt's Python exceptions, raised from C++ ---*- C++ -*-===//
//
// The exception classes live in Python (memopt/_errors.py) so that both
// extension modules raise the same ones and `except memopt.Error` catches
// all of them. C++ raises one by name with the compiler's or the runtime's
// message (which names the ONNX node or the tensor).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_PYTHON_ERRORS_H
#define MEMOPT_PYTHON_ERRORS_H

#include <nanobind/nanobind.h>

#include <string>

namespace memopt::python {

/// Raises memopt.<kind> (CompileError, InputError, ExecutionError,
/// LoadError) with `message`. Needs the GIL.
[[noreturn]] inline void raise(const char *kind, const std::string &message) {
  nanobind::object type =
      nanobind::module_::import_("memopt._errors").attr(kind);
  PyErr_SetString(type.ptr(), message.c_str());
  throw nanobind::python_error();
}

} // namespace memopt::python

#endif // MEMOPT_PYTHON_ERRORS_H
