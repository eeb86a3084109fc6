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
      .def_property_readonly("va", [](const DeviceBuffer& b) { return b.buffer.va; })
      // tinygrad's Buffer.as_memoryview: the bytes, once the device has finished writing them.
      // With allow_zero_copy (or force_zero_copy) on a device whose memory the CPU addresses,
      // a read-only view of that memory that keeps the buffer alive; otherwise a copy.
      // force_zero_copy on another device is a RuntimeError.
      .def(
          "as_memoryview",
          [](const std::shared_ptr<DeviceBuffer>& b, bool allow_zero_copy,
             bool force_zero_copy) -> py::object {
            b->device->synchronize().throw_if_error("as_memoryview");
            size_t n = b->buffer.bytes;
            if ((allow_zero_copy || force_zero_copy) && b->device->host_addressable()) {
              using Owner = std::shared_ptr<DeviceBuffer>;
              py::capsule owner(new Owner(b), [](void* p) { delete static_cast<Owner*>(p); });
              py::array arr(py::dtype("uint8"), {static_cast<py::ssize_t>(n)}, {py::ssize_t{1}},
                            reinterpret_cast<void*>(static_cast<uintptr_t>(b->buffer.va)), owner);
              arr.attr("setflags")(py::arg("write") =
                                       false);  // tensors' memory: no writes behind them
              return py::memoryview(arr);
            }
            if (force_zero_copy)
              throw std::runtime_error("[as_memoryview] " + b->device->name() +
                                       " buffers are not host memory: no zero-copy view");
            std::string bytes(n, '\0');
            if (n) b->device->copy_out(bytes.data(), b->buffer, n).throw_if_error("as_memoryview");
            return py::memoryview(py::bytearray(bytes.data(), n));
          },
          py::arg("allow_zero_copy") = false, py::arg("force_zero_copy") = false);

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
  cls.def_static("of_buffer", &Tensor::of_buffer, py::arg("view"));
}

}  // namespace baregrad::python
