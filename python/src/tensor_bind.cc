// _baregrad.Tensor: creation, properties and autograd (tensor.h), one method per C++ call.
#include "base/error.h"
#include "python/src/bind.h"
#include "tensor/nn.h"
#include "tensor/schedule.h"

namespace baregrad::python {
namespace {

std::string dtype_name(const Tensor& t) { return t.dtype().name(); }

// The kernels that realize some tensors, made but not run (baregrad.engine.realize: tinygrad's
// schedule_linear / run_linear). Runs once.
struct Schedule {
  std::vector<tensor::ScheduleItem> items;
  bool ran = false;
};

Schedule make_schedule(const std::vector<Tensor>& ts) {
  std::vector<tensor::Lazy> targets;
  for (const Tensor& t : ts) targets.push_back(t.lazy());
  return Schedule{tensor::create_schedule(targets)};
}

void bind_schedule(py::module_& m) {
  py::class_<Schedule>(m, "Schedule")
      .def("__len__", [](const Schedule& s) { return s.items.size(); })
      // Per kernel: (device, output shape, output dtype, buffers read, Variable values).
      .def("kernels",
           [](const Schedule& s) {
             py::list out;
             for (const auto& it : s.items) {
               const auto& o = *it.bufs[0];
               out.append(py::make_tuple(o.device->name(), py::tuple(py::cast(o.shape)),
                                         o.dtype.name(), it.bufs.size() - 1, py::cast(it.vars)));
             }
             return out;
           })
      .def("compile", [](const Schedule& s) { tensor::compile_schedule(s.items); })
      .def("estimate",
           [](const Schedule& s, size_t i) {
             if (i >= s.items.size())
               fail("estimate_uop",
                    "kernel " + std::to_string(i) + " of a schedule of " +
                        std::to_string(s.items.size()),
                    ErrorKind::kIndex);
             return tensor::estimate_item(s.items[i]);
           })
      .def("run", [](Schedule& s) {
        if (s.ran) fail("run_linear", "this schedule has run already: make a new one");
        s.ran = true;
        tensor::run_schedule(s.items);  // a copy: the kernels stay listed (estimate_uop)
      });
  m.def("schedule", &make_schedule, py::arg("tensors"));
}

// Constructors and the seeded random generators.
void bind_creation(TensorClass& cls) {
  cls.def_static(
         "full",
         [](Shape shape, double value, const std::string& dtype, const std::string& device) {
           return Tensor::full(std::move(shape), value, dtype_of(dtype), device);
         },
         py::arg("shape"), py::arg("value"), py::arg("dtype"), py::arg("device") = "")
      .def_static(
          "empty",
          [](Shape shape, const std::string& dtype, const std::string& device) {
            return Tensor::empty(std::move(shape), dtype_of(dtype), device);
          },
          py::arg("shape"), py::arg("dtype"), py::arg("device") = "")
      .def_static(
          "arange",
          [](double start, double stop, double step, const std::string& dtype,
             const std::string& device) {
            return Tensor::arange(start, stop, step, dtype_of(dtype), device);
          },
          py::arg("start"), py::arg("stop"), py::arg("step"), py::arg("dtype"),
          py::arg("device") = "")
      .def_static(
          "eye",
          [](int64_t n, int64_t mm, const std::string& dtype) {
            return Tensor::eye(n, mm, dtype_of(dtype));
          },
          py::arg("n"), py::arg("m"), py::arg("dtype"))
      .def_static(
          "linspace",
          [](double start, double stop, int64_t steps, const std::string& dtype) {
            return Tensor::linspace(start, stop, steps, dtype_of(dtype));
          },
          py::arg("start"), py::arg("stop"), py::arg("steps"), py::arg("dtype"))
      .def_static("manual_seed", &Tensor::manual_seed, py::arg("seed"))
      .def_static(
          "rand",
          [](Shape shape, const std::string& dtype, const std::string& device) {
            return Tensor::rand(std::move(shape), dtype_of(dtype), device);
          },
          py::arg("shape"), py::arg("dtype"), py::arg("device") = "")
      .def_static(
          "randn",
          [](Shape shape, const std::string& dtype, const std::string& device) {
            return Tensor::randn(std::move(shape), dtype_of(dtype), device);
          },
          py::arg("shape"), py::arg("dtype"), py::arg("device") = "")
      .def_static(
          "uniform",
          [](Shape shape, double lo, double hi, const std::string& dtype,
             const std::string& device) {
            return Tensor::uniform(std::move(shape), lo, hi, dtype_of(dtype), device);
          },
          py::arg("shape"), py::arg("low"), py::arg("high"), py::arg("dtype"),
          py::arg("device") = "")
      .def_static(
          "randint",
          [](Shape shape, int64_t low, int64_t high, const std::string& dtype,
             const std::string& device) {
            return Tensor::randint(std::move(shape), low, high, dtype_of(dtype), device);
          },
          py::arg("shape"), py::arg("low"), py::arg("high"), py::arg("dtype"),
          py::arg("device") = "")
      .def_static(
          "normal",
          [](Shape shape, double mean, double std, const std::string& dtype,
             const std::string& device) {
            return Tensor::normal(std::move(shape), mean, std, dtype_of(dtype), device);
          },
          py::arg("shape"), py::arg("mean"), py::arg("std"), py::arg("dtype"),
          py::arg("device") = "")
      .def_static("rand_like", &Tensor::rand_like);
}

}  // namespace

void bind_tensor(py::module_& m) {
  bind_schedule(m);
  bind_graph(m);
  TensorClass cls(m, "Tensor");
  bind_graph_of(cls);
  bind_creation(cls);
  bind_sym(m, cls);
  cls.def_property_readonly("shape",
                            [](const Tensor& t) {
                              py::tuple out(t.shape().size());
                              for (size_t i = 0; i < t.shape().size(); i++)
                                out[i] = py::int_(t.shape()[i]);
                              return out;
                            })
      .def_property_readonly("dtype", &dtype_name)
      .def_property_readonly("device", &Tensor::device)
      .def_property_readonly("ndim", &Tensor::ndim)
      .def("numel", &Tensor::numel)
      .def("same", &Tensor::same)
      // ---- autograd ----
      .def_property_readonly("requires_grad", &Tensor::requires_grad_state)
      .def(
          "requires_grad_", [](Tensor& t, std::optional<bool> on) { t.set_requires_grad(on); },
          py::arg("on"))
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      .def_property_readonly("value_unshared", &Tensor::value_unshared)
      .def_property_readonly("grad", &Tensor::grad)
      .def("set_grad", &Tensor::set_grad)
      .def("clear_grad", &Tensor::clear_grad)
      .def("retain_grad", &Tensor::retain_grad)
      .def("backward", &Tensor::backward, py::arg("grad_out") = std::nullopt)
      .def("gradient", &Tensor::gradient, py::arg("targets"), py::arg("materialize") = false)
      .def("detach", &Tensor::detach)
      .def("detached_leaf", &Tensor::detached_leaf)
      .def("assign", &Tensor::assign)
      .def("write_view", [](Tensor& t, const Tensor& v) { t.write_view(v); })
      .def_static("assign_all", &Tensor::assign_all)
      .def("realize", [](const Tensor& t) { t.realize(); })
      .def("contiguous", &Tensor::contiguous)
      .def("to", &Tensor::to, py::arg("device"));
  bind_tensor_ops(cls);
  bind_host(cls);
  m.def("conv_transpose2d", &tensor::nn::conv_transpose2d, py::arg("x"), py::arg("weight"),
        py::arg("bias"), py::arg("stride"), py::arg("padding"), py::arg("output_padding"),
        py::arg("dilation"), py::arg("groups"));
}

}  // namespace baregrad::python
