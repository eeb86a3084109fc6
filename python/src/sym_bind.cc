// _baregrad.Sym (compiler/sym.h) and the Tensor ops whose sizes may hold Variables. The Python
// layer wraps Syms in ints (baregrad/variable.py: SymInt) that carry their current value.
#include "python/src/bind.h"

namespace baregrad::python {
namespace {

using compiler::Bindings;
using compiler::Sym;
using SymRanges = std::vector<std::pair<Sym, Sym>>;

}  // namespace

void bind_sym(py::module_& m, TensorClass& cls) {
  py::class_<Sym>(m, "Sym")
      .def(py::init<int64_t>())
      .def_static("var", [](const std::string& name, int64_t lo,
                            int64_t hi) { return Sym::var({name, lo, hi}); })
      .def("is_const", &Sym::is_const)
      .def("const_value", &Sym::const_value)
      .def("eval", &Sym::eval)
      .def_property_readonly("vmin", &Sym::vmin)
      .def_property_readonly("vmax", &Sym::vmax)
      .def("vars",
           [](const Sym& s) {
             py::list out;
             for (const compiler::SymVar& v : s.vars())
               out.append(py::make_tuple(v.name, v.min, v.max));
             return out;
           })
      .def("__add__", [](const Sym& a, const Sym& b) { return a + b; })
      .def("__sub__", [](const Sym& a, const Sym& b) { return a - b; })
      .def("__mul__", [](const Sym& a, const Sym& b) { return a * b; })
      .def("__neg__", [](const Sym& a) { return -a; })
      .def("__eq__", [](const Sym& a, const Sym& b) { return a == b; })
      .def("__hash__", [](const Sym& a) { return a.hash(); })
      .def("__str__", &Sym::str)
      .def("__repr__", [](const Sym& s) { return "Sym(" + s.str() + ")"; });
  py::implicitly_convertible<int64_t, Sym>();

  cls.def_static("sym_scalar",
                 [](const Sym& value, const Bindings& vals, const std::string& dtype,
                    const std::string& device) {
                   return Tensor::sym_scalar(value, vals, dtype_of(dtype), device);
                 })
      .def("expand_sym", &Tensor::expand_sym)
      .def("shrink_sym", &Tensor::shrink_sym)
      .def("pad_sym", &Tensor::pad_sym)
      .def_property_readonly("sym_shape", &Tensor::sym_shape)
      .def_property_readonly("sym_vals", &Tensor::sym_vals);
}

}  // namespace baregrad::python
