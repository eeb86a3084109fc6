// The _baregrad extension module: errors, dtypes and the binders of bind.h.
#include "base/error.h"
#include "python/src/bind.h"

namespace baregrad::python {

DType dtype_of(const std::string& name) {
  DType t = tensor::dtypes::from_name(name);
  if (name == "void") throw py::type_error("dtype void has no values: no tensor holds it");
  if (t == tensor::dtypes::kVoid) throw py::type_error("unknown dtype '" + name + "'");
  return t;
}

py::object numpy_dtype(DType t) {
  if (t == tensor::dtypes::kBFloat16 || compiler::dtypes::is_fp8(t)) return py::none();
  return py::dtype(t.name());
}

namespace {
// baregrad::Error becomes the Python exception its kind names; what() ("[op] message") stays.
void translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const Error& e) {
    PyObject* type = PyExc_RuntimeError;
    switch (e.kind()) {
      case ErrorKind::kValue:
        type = PyExc_ValueError;
        break;
      case ErrorKind::kIndex:
        type = PyExc_IndexError;
        break;
      case ErrorKind::kType:
        type = PyExc_TypeError;
        break;
      case ErrorKind::kMemory:
        type = PyExc_MemoryError;
        break;
      case ErrorKind::kRuntime:
        break;
    }
    PyErr_SetString(type, e.what());
  }
}
}  // namespace

}  // namespace baregrad::python

PYBIND11_MODULE(_baregrad, m) {
  namespace bp = baregrad::python;
  m.doc() = "baregrad's C++ tensor layer; use the `baregrad` package (tinygrad's API) instead";
  pybind11::register_exception_translator(&bp::translate);
  bp::bind_tensor(m);
  bp::bind_training(m);
  bp::bind_runtime(m);
}
