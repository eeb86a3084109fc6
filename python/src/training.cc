// _baregrad training pieces: optimizers (optim.h), TinyJit (jit.h), safetensors and state dicts
// (state.h, nn_state.h).
#include <pybind11/functional.h>

#include "python/src/bind.h"
#include "tensor/jit.h"
#include "tensor/nn_state.h"
#include "tensor/optim.h"
#include "tensor/state.h"

namespace baregrad::python {
namespace {

using tensor::Adam;
using tensor::LAMB;
using tensor::Optimizer;
using tensor::SGD;
using tensor::TinyJit;

// A Python callable as a TinyJit step: list of tensors in, list of tensors out.
TinyJit::Fn jit_fn(py::function fn) {
  return [fn = std::move(fn)](const std::vector<Tensor>& xs) {
    py::gil_scoped_acquire gil;
    return fn(xs).cast<std::vector<Tensor>>();
  };
}

// Assigns `loaded` into the tensors of `entries` (name, tensor) with nn::load_state_dict.
void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& entries,
                     const std::map<std::string, Tensor>& loaded,
                     bool strict) {
  tensor::nn::StateDict sd;
  for (const auto& [name, t] : entries) sd.add_tensor(name, t);
  tensor::nn::load_state_dict(sd, loaded, strict);
}

}  // namespace

void bind_training(py::module_& m) {
  py::class_<Optimizer>(m, "Optimizer")
      .def("zero_grad", &Optimizer::zero_grad)
      .def("step", &Optimizer::step)
      .def_property_readonly("lr", [](const Optimizer& o) { return o.lr(); })
      .def("set_lr", &Optimizer::set_lr);
  py::class_<SGD, Optimizer>(m, "SGD").def(
      py::init<std::vector<Tensor>, double, double, double, bool>(), py::arg("params"),
      py::arg("lr"), py::arg("momentum"), py::arg("weight_decay"), py::arg("nesterov"));
  py::class_<Adam, Optimizer>(m, "Adam")
      .def(py::init<std::vector<Tensor>, double, double, double, double, double>(),
           py::arg("params"), py::arg("lr"), py::arg("b1"), py::arg("b2"), py::arg("eps"),
           py::arg("weight_decay"))
      .def_property_readonly("m", &Adam::m)
      .def_property_readonly("v", &Adam::v)
      .def_property_readonly("b1_t", &Adam::b1_t)
      .def_property_readonly("b2_t", &Adam::b2_t);
  py::class_<LAMB, Adam>(m, "LAMB").def(
      py::init<std::vector<Tensor>, double, double, double, double, double>(), py::arg("params"),
      py::arg("lr"), py::arg("b1"), py::arg("b2"), py::arg("eps"), py::arg("weight_decay"));

  py::class_<TinyJit>(m, "TinyJit")
      .def(py::init([](py::function fn, bool prune) {
             return std::make_unique<TinyJit>(jit_fn(std::move(fn)), prune);
           }),
           py::arg("fn"), py::arg("prune") = false)
      .def("__call__", &TinyJit::operator(), py::arg("inputs"),
           py::arg("vals") = compiler::Bindings{})
      .def_property_readonly("shared", &TinyJit::shared)
      .def_property_readonly("may_share", &TinyJit::may_share)
      .def_property_readonly("captured_vals", &TinyJit::captured_vals)
      .def_property_readonly("why_not_shared", &TinyJit::why_not_shared)
      .def_property_readonly("calls", &TinyJit::calls)
      .def_property_readonly("captured", &TinyJit::captured)
      .def_property_readonly("kernel_count", &TinyJit::kernel_count)
      .def("kernels", &TinyJit::kernels)
      .def_property_readonly("uses_graph", &TinyJit::uses_graph)
      .def_property_readonly("intermediate_bytes", &TinyJit::intermediate_bytes)
      .def_property_readonly("planned_bytes", &TinyJit::planned_bytes)
      .def("reset", &TinyJit::reset)
      .def("free_intermediates", &TinyJit::free_intermediates);
  m.def("jit_specialize", &tensor::detail::jit_specialize, py::arg("why"));
  m.def("jit_capturing", [] { return tensor::detail::jit_capture() != nullptr; });
  m.def("set_jit_capturing", &tensor::detail::set_jit_capturing, py::arg("on"));

  m.def("safe_save", &tensor::safe_save, py::arg("tensors"), py::arg("path"), py::arg("metadata"));
  m.def("safe_load", &tensor::safe_load, py::arg("path"), py::arg("device") = "");
  m.def("safe_load_metadata", &tensor::safe_load_metadata, py::arg("path"));
  m.def(
      "safe_load_bytes",
      [](const std::string& name, py::bytes data, const std::string& device) {
        std::string_view v = data;
        return tensor::safe_load_bytes(name, reinterpret_cast<const uint8_t*>(v.data()), v.size(),
                                       device);
      },
      py::arg("name"), py::arg("data"), py::arg("device") = "");
  m.def("load_state_dict", &load_state_dict, py::arg("entries"), py::arg("loaded"),
        py::arg("strict"));
}

}  // namespace baregrad::python
