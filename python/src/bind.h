// Shared helpers of the _baregrad extension: dtype names, numpy conversion, the binders.
// _baregrad stays close to the C++ API (tensor/*.h); python/baregrad/ gives tinygrad's names.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <utility>

#include "tensor/tensor.h"

namespace baregrad::python {

namespace py = pybind11;
using tensor::DType;
using tensor::Shape;
using tensor::Tensor;

// The holder of every _baregrad.Tensor object (owns one heap Tensor, as std::unique_ptr would):
// it counts the Python objects holding each tensor (Tensor::count_handle), so that backward()
// can fill .grad of the tensors a program holds, as tinygrad's does.
template <typename T>
class PyHandle {
 public:
  PyHandle() = default;
  explicit PyHandle(T* p) : p_(p) {
    if (p_) p_->count_handle(1);
  }
  PyHandle(PyHandle&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  PyHandle& operator=(PyHandle&& o) noexcept {
    reset();
    p_ = std::exchange(o.p_, nullptr);
    return *this;
  }
  PyHandle(const PyHandle&) = delete;
  PyHandle& operator=(const PyHandle&) = delete;
  ~PyHandle() { reset(); }
  T* get() const { return p_; }

 private:
  void reset() {
    if (!p_) return;
    p_->count_handle(-1);
    delete p_;
    p_ = nullptr;
  }
  T* p_ = nullptr;
};

using TensorClass = py::class_<Tensor, PyHandle<Tensor>>;

// The dtype called `name` ("float32", "int8", ...); TypeError when there is none.
DType dtype_of(const std::string& name);
// The numpy dtype holding `t` element for element; None for bfloat16 and the fp8s (numpy has none).
py::object numpy_dtype(DType t);

// Each binder adds its part of the module.
void bind_tensor(py::module_& m);
void bind_tensor_ops(TensorClass& cls);
void bind_host(TensorClass& cls);
void bind_training(py::module_& m);
void bind_runtime(py::module_& m);
void bind_sym(py::module_& m, TensorClass& cls);
void bind_graph(py::module_& m);
void bind_graph_of(TensorClass& cls);

}  // namespace baregrad::python

PYBIND11_DECLARE_HOLDER_TYPE(T, baregrad::python::PyHandle<T>)
