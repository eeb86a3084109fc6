// Shared helpers of the _baregrad extension: dtype names, numpy conversion, the binders.
// _baregrad stays close to the C++ API (tensor/*.h); python/baregrad/ gives tinygrad's names.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "tensor/tensor.h"

namespace baregrad::python {

namespace py = pybind11;
using tensor::DType;
using tensor::Shape;
using tensor::Tensor;

// The dtype called `name` ("float32", "int8", ...); TypeError when there is none.
DType dtype_of(const std::string& name);
// The numpy dtype holding `t` element for element; None for bfloat16 and the fp8s (numpy has none).
py::object numpy_dtype(DType t);

// Each binder adds its part of the module.
void bind_tensor(py::module_& m);
void bind_tensor_ops(py::class_<Tensor>& cls);
void bind_host(py::class_<Tensor>& cls);
void bind_training(py::module_& m);
void bind_runtime(py::module_& m);
void bind_sym(py::module_& m, py::class_<Tensor>& cls);

}  // namespace baregrad::python
