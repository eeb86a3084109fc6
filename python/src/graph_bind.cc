// A read-only view of a tensor's lazy graph (tensor/lazy.h) for Python: Tensor.uop in
// baregrad/uop/graph.py, shaped as tinygrad's UOp (op, src, base, realized). Nothing here
// changes the graph.
#include "python/src/bind.h"
#include "tensor/lazy.h"

namespace baregrad::python {
namespace {

using tensor::DeviceBuffer;
using tensor::Lazy;
using tensor::LazyKind;

const char* kind_name(LazyKind k) {
  switch (k) {
    case LazyKind::kBuffer:
      return "BUFFER";
    case LazyKind::kConst:
      return "CONST";
    case LazyKind::kAlu:
      return "ALU";
    case LazyKind::kReduce:
      return "REDUCE";
    case LazyKind::kCast:
      return "CAST";
    case LazyKind::kIota:
      return "IOTA";
    case LazyKind::kCopy:
      return "COPY";
  }
  return "?";
}

// The base as a tensor of its own (its whole contiguous layout).
Lazy base_view(const Lazy& l) {
  return Lazy{l.base, compiler::ShapeTracker::contiguous(l.base->shape), l.base->sym};
}

}  // namespace

void bind_graph(py::module_& m) {
  // One realized buffer; the same Python object for as long as one is alive (pybind keeps a
  // registry by address), so `t.uop.base.realized is buf` holds across calls.
  py::class_<DeviceBuffer, std::shared_ptr<DeviceBuffer>>(m, "DeviceBuffer", py::dynamic_attr())
      .def_property_readonly("nbytes", [](const DeviceBuffer& b) { return b.buffer.bytes; })
      .def_property_readonly("device", [](const DeviceBuffer& b) { return b.device->name(); })
      .def_property_readonly("va", [](const DeviceBuffer& b) { return b.buffer.va; });

  py::class_<Lazy>(m, "LazyNode")
      .def_property_readonly("kind", [](const Lazy& l) { return kind_name(l.base->kind); })
      .def_property_readonly("op", [](const Lazy& l) { return compiler::op_name(l.base->op); })
      .def_property_readonly("is_base", &Lazy::is_base_view)
      .def_property_readonly("base", &base_view)
      .def_property_readonly(
          "base_id", [](const Lazy& l) { return reinterpret_cast<uintptr_t>(l.base.get()); })
      .def_property_readonly("view", [](const Lazy& l) { return l.st.str(); })
      .def_property_readonly("srcs", [](const Lazy& l) { return l.base->srcs; })
      .def_property_readonly("shape", [](const Lazy& l) { return l.shape(); })
      .def_property_readonly("dtype", [](const Lazy& l) { return l.dtype().name(); })
      .def_property_readonly("device", [](const Lazy& l) { return l.base->device->name(); })
      .def_property_readonly("value", [](const Lazy& l) { return l.base->value; })
      .def_property_readonly("axes", [](const Lazy& l) { return l.base->axes; })
      .def_property_readonly("force_kernel", [](const Lazy& l) { return l.base->force_kernel; })
      .def_property_readonly("realized", [](const Lazy& l) { return l.base->realized; });
}

void bind_graph_of(TensorClass& cls) {
  cls.def("lazy_node", [](const Tensor& t) { return t.lazy(); });
}

}  // namespace baregrad::python
