// Host data of _baregrad.Tensor: exact byte copies in and out, numpy arrays, in-place views.
#include <cstring>
#include <vector>

#include "compiler/fp8.h"
#include "python/src/bind.h"

namespace baregrad::python {
namespace {

using Owner = std::shared_ptr<const tensor::DeviceBuffer>;

// True when the view walks its elements in row-major order (size-1 dims have any stride).
bool row_major(const Tensor::HostView& v) {
  int64_t expect = 1;
  for (size_t d = v.shape.size(); d-- > 0;) {
    if (v.shape[d] != 1 && v.strides[d] != expect) return false;
    expect *= v.shape[d];
  }
  return true;
}

// A copy of a C-contiguous buffer (bytes, bytearray, a numpy array) as a tensor of `dtype`.
Tensor from_buffer(const py::buffer& data,
                   Shape shape,
                   const std::string& dtype,
                   const std::string& device) {
  py::buffer_info info = data.request();
  py::ssize_t expect = info.itemsize;
  for (py::ssize_t d = info.ndim - 1; d >= 0; d--) {
    if (info.shape[d] != 1 && info.strides[d] != expect)
      throw py::value_error("[from_bytes] the buffer is not C-contiguous");
    expect *= info.shape[d];
  }
  size_t bytes = static_cast<size_t>(info.size) * static_cast<size_t>(info.itemsize);
  DType t = dtype_of(dtype);
  if (compiler::dtypes::is_fp8(t) && py::isinstance<py::array>(data)) {
    // numpy has no fp8: an array's values are encoded (one rounding each); bytes stay codes.
    auto values = py::array_t < double, py::array::c_style | py::array::forcecast > ::ensure(data);
    std::vector<uint8_t> codes(static_cast<size_t>(values.size()));
    for (size_t i = 0; i < codes.size(); i++) codes[i] = compiler::fp8_encode(t, values.data()[i]);
    return Tensor::from_bytes(codes.data(), codes.size(), std::move(shape), t, device);
  }
  return Tensor::from_bytes(info.ptr, bytes, std::move(shape), t, device);
}

// The tensor's elements in place as a read-only numpy array whose base keeps the device
// buffer alive; None when the memory is not host-addressable or the layout is not strided.
py::object host_view(const Tensor& t) {
  py::object dt = numpy_dtype(t.dtype());
  if (dt.is_none()) return py::none();
  std::optional<Tensor::HostView> hv = t.host_view();
  if (!hv) return py::none();
  auto itemsize = static_cast<py::ssize_t>(t.dtype().itemsize());
  std::vector<py::ssize_t> shape(hv->shape.begin(), hv->shape.end()), strides;
  for (int64_t s : hv->strides) strides.push_back(static_cast<py::ssize_t>(s) * itemsize);
  py::capsule base(new Owner(hv->owner), [](void* p) { delete static_cast<Owner*>(p); });
  py::array arr(py::dtype::from_args(dt), shape, strides, hv->data, base);
  arr.attr("setflags")(py::arg("write") = false);
  return arr;
}

// A new, writable numpy array holding a copy of the elements (bfloat16 and the fp8s widen to
// float32, as tinygrad's numpy()).
py::array to_numpy(const Tensor& t) {
  bool widen = t.dtype() == tensor::dtypes::kBFloat16 || compiler::dtypes::is_fp8(t.dtype());
  Tensor src = widen ? t.cast(tensor::dtypes::kFloat32) : t;
  std::vector<py::ssize_t> shape(src.shape().begin(), src.shape().end());
  py::array out(py::dtype::from_args(numpy_dtype(src.dtype())), shape);
  auto bytes = static_cast<size_t>(out.nbytes());
  if (bytes == 0) return out;
  if (std::optional<Tensor::HostView> hv = src.host_view(); hv && row_major(*hv)) {
    std::memcpy(out.mutable_data(), hv->data, bytes);  // one copy, straight from device memory
  } else {
    std::vector<uint8_t> raw = src.to_bytes();
    std::memcpy(out.mutable_data(), raw.data(), bytes);
  }
  return out;
}

}  // namespace

void bind_host(TensorClass& cls) {
  cls.def_static("from_bytes", &from_buffer, py::arg("data"), py::arg("shape"), py::arg("dtype"),
                 py::arg("device") = "")
      .def_static(
          "from_blob",
          [](uintptr_t ptr, Shape shape, const std::string& dtype, const std::string& device) {
            return Tensor::from_blob(reinterpret_cast<void*>(ptr), std::move(shape),
                                     dtype_of(dtype), device);
          },
          py::arg("ptr"), py::arg("shape"), py::arg("dtype"), py::arg("device") = "")
      .def("to_bytes",
           [](const Tensor& t) {
             std::vector<uint8_t> raw = t.to_bytes();
             return py::bytes(reinterpret_cast<const char*>(raw.data()), raw.size());
           })
      .def("numpy", &to_numpy)
      .def("host_view", &host_view);
}

}  // namespace baregrad::python
