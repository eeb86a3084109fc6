// _baregrad.Tensor ops: elementwise, movement, reductions, nn ops and indexing (tensor.h).
// Arguments follow the C++ signatures; tinygrad's names and defaults live in the Python layer.
#include "python/src/bind.h"

namespace baregrad::python {
namespace {

using Pads = std::vector<std::pair<int64_t, int64_t>>;
using Axes = std::vector<int>;
using tensor::Idx;

// One Python index item: int, slice, None, Ellipsis or Tensor (lists are tensors by now).
Idx to_idx(const py::handle& h) {
  if (h.is_none()) return Idx::none();
  if (h.is(py::ellipsis())) return Idx::ellipsis();
  if (py::isinstance<Tensor>(h)) return Idx(h.cast<const Tensor&>());
  if (py::isinstance<py::slice>(h)) {
    // Python ints beyond int64 clamp to its ends: slicing clamps to the axis anyway, and a
    // step that large takes at most one element either way.
    auto opt = [](const py::object& o) -> std::optional<int64_t> {
      if (o.is_none()) return std::nullopt;
      int overflow = 0;
      long long v = PyLong_AsLongLongAndOverflow(o.ptr(), &overflow);
      if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
      if (overflow) return overflow > 0 ? INT64_MAX : INT64_MIN;
      return static_cast<int64_t>(v);
    };
    std::optional<int64_t> step = opt(h.attr("step"));
    return Idx::slice(opt(h.attr("start")), opt(h.attr("stop")), step.value_or(1));
  }
  if (py::isinstance<py::int_>(h)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
    if (overflow)
      throw py::index_error("[getitem] index " + py::str(h).cast<std::string>() +
                            " is out of range (it does not fit int64)");
    return Idx(static_cast<int64_t>(v));
  }
  throw py::index_error(std::string("[getitem] ") +
                        py::str(h.get_type().attr("__name__")).cast<std::string>() +
                        " indexing is not supported");
}

// Arithmetic, comparisons, casts, math and activations.
void bind_elementwise(TensorClass& cls) {
  cls.def("add", [](const Tensor& a, const Tensor& b) { return a + b; })
      .def("scalar_op", &Tensor::scalar_op, py::arg("op"), py::arg("value"),
           py::arg("reverse") = false)
      // The hot paths of Tensor._binary (python/baregrad/tensor.py): one call each, where
      // reading .dtype first cost a tiny op ~0.2 us.
      .def(
          "float_scalar_op",
          [](const Tensor& a, std::string_view op, double v,
             bool reverse) -> std::optional<Tensor> {
            if (!compiler::dtypes::is_float(a.dtype())) return std::nullopt;
            return a.scalar_op(op, v, reverse);
          },
          "scalar_op when this is a float tensor, else None")
      .def(
          "same_float_dtype",
          [](const Tensor& a, const Tensor& b) {
            return a.dtype() == b.dtype() && compiler::dtypes::is_float(a.dtype());
          },
          "whether both have one float dtype")
      .def("sub", [](const Tensor& a, const Tensor& b) { return a - b; })
      .def("mul", [](const Tensor& a, const Tensor& b) { return a * b; })
      .def("div", [](const Tensor& a, const Tensor& b) { return a / b; })
      .def("neg", [](const Tensor& a) { return -a; })
      .def("maximum", &Tensor::maximum)
      .def("minimum", &Tensor::minimum)
      .def("lt", &Tensor::lt)
      .def("eq", &Tensor::eq)
      .def("ne", &Tensor::ne)
      .def("gt", &Tensor::gt)
      .def("ge", &Tensor::ge)
      .def("le", &Tensor::le)
      .def_static("where", &Tensor::where)
      .def("bitcast",
           [](const Tensor& t, const std::string& dt) { return t.bitcast(dtype_of(dt)); })
      .def("cast",
           [](const Tensor& t, const std::string& dtype) { return t.cast(dtype_of(dtype)); })
      .def("relu", &Tensor::relu)
      .def("exp", &Tensor::exp)
      .def("exp2", &Tensor::exp2)
      .def("log", &Tensor::log)
      .def("log2", &Tensor::log2)
      .def("sqrt", &Tensor::sqrt)
      .def("sin", &Tensor::sin)
      .def("cos", &Tensor::cos)
      .def("tan", &Tensor::tan)
      .def("reciprocal", &Tensor::reciprocal)
      .def("sigmoid", &Tensor::sigmoid)
      .def("square", &Tensor::square)
      .def("abs", &Tensor::abs)
      .def("sign", &Tensor::sign)
      .def("pow", static_cast<Tensor (Tensor::*)(const Tensor&) const>(&Tensor::pow))
      .def("pow_scalar", static_cast<Tensor (Tensor::*)(double) const>(&Tensor::pow))
      .def("clamp", &Tensor::clamp, py::arg("lo"), py::arg("hi"))
      .def("lerp",
           static_cast<Tensor (Tensor::*)(const Tensor&, const Tensor&) const>(&Tensor::lerp))
      .def("logical_not", &Tensor::logical_not)
      .def("logical_and", &Tensor::logical_and)
      .def("logical_or", &Tensor::logical_or)
      .def("tanh", &Tensor::tanh)
      .def("leaky_relu", &Tensor::leaky_relu, py::arg("slope"))
      .def("gelu", &Tensor::gelu)
      .def("quick_gelu", &Tensor::quick_gelu)
      .def("silu", &Tensor::silu)
      .def("softplus", &Tensor::softplus, py::arg("beta"))
      .def("mish", &Tensor::mish)
      .def("elu", &Tensor::elu, py::arg("alpha"))
      .def("selu", &Tensor::selu)
      .def("hardswish", &Tensor::hardswish)
      .def("relu6", &Tensor::relu6)
      .def("hardtanh", &Tensor::hardtanh, py::arg("lo"), py::arg("hi"))
      .def("bitwise_and", &Tensor::bitwise_and)
      .def("bitwise_or", &Tensor::bitwise_or)
      .def("bitwise_xor", &Tensor::bitwise_xor)
      .def("bitwise_not", &Tensor::bitwise_not)
      .def("lshift", &Tensor::lshift)
      .def("rshift", &Tensor::rshift)
      .def("idiv", &Tensor::idiv)
      .def("mod", &Tensor::mod)
      .def("trunc", &Tensor::trunc)
      .def("floor", &Tensor::floor)
      .def("ceil", &Tensor::ceil)
      .def("round", &Tensor::round)
      .def("isnan", &Tensor::isnan)
      .def("isinf", &Tensor::isinf, py::arg("detect_positive"), py::arg("detect_negative"))
      .def("isfinite", &Tensor::isfinite);
}

// Views, joins, splits and indexing.
void bind_movement(TensorClass& cls) {
  cls.def("reshape", &Tensor::reshape)
      .def("permute", &Tensor::permute)
      .def("expand", &Tensor::expand)
      .def("pad", &Tensor::pad)
      .def("pad_mode", &Tensor::pad_mode, py::arg("pads"), py::arg("mode"), py::arg("value"))
      .def("shrink", &Tensor::shrink)
      .def("flip", &Tensor::flip)
      .def("transpose", &Tensor::transpose)
      .def("flatten", static_cast<Tensor (Tensor::*)(int, int) const>(&Tensor::flatten))
      .def("unflatten", &Tensor::unflatten)
      .def("unsqueeze", &Tensor::unsqueeze)
      .def("squeeze", &Tensor::squeeze)
      .def("slice", &Tensor::slice)
      .def("repeat", &Tensor::repeat)
      .def("roll", &Tensor::roll, py::arg("shift"), py::arg("axis"))
      .def_static("cat", &Tensor::cat)
      .def_static("stack", &Tensor::stack)
      .def("split",
           static_cast<std::vector<Tensor> (Tensor::*)(int64_t, int) const>(&Tensor::split))
      .def("split_sizes",
           static_cast<std::vector<Tensor> (Tensor::*)(const std::vector<int64_t>&, int) const>(
               &Tensor::split))
      .def("chunk", &Tensor::chunk)
      .def("getitem", [](const Tensor& t, const py::list& items) {
        std::vector<Idx> idx;
        for (const py::handle& h : items) idx.push_back(to_idx(h));
        return t[idx];
      });
}

// Reductions, scans, linear algebra and nn ops.
void bind_reductions(TensorClass& cls) {
  cls.def("sum", &Tensor::sum)
      .def("max", &Tensor::max)
      .def("min", &Tensor::min)
      .def("mean", &Tensor::mean)
      .def("prod", &Tensor::prod)
      .def("any", &Tensor::any)
      .def("all", &Tensor::all)
      .def("var", &Tensor::var)
      .def("std", &Tensor::std)
      .def("logsumexp", &Tensor::logsumexp)
      .def("cumsum", &Tensor::cumsum)
      .def("cumprod", &Tensor::cumprod)
      .def("argmax", &Tensor::argmax)
      .def("argmin", &Tensor::argmin)
      .def("softmax", &Tensor::softmax)
      .def("log_softmax", &Tensor::log_softmax)
      .def("matmul", &Tensor::matmul)
      .def_static("einsum", &Tensor::einsum)
      .def("pool_windows", &Tensor::pool_windows)
      .def("conv2d", &Tensor::conv2d, py::arg("weight"), py::arg("bias"), py::arg("stride"),
           py::arg("padding"), py::arg("dilation"), py::arg("groups"))
      .def("max_pool2d", &Tensor::max_pool2d)
      .def("avg_pool2d", &Tensor::avg_pool2d)
      .def("gather", &Tensor::gather)
      .def("scatter", &Tensor::scatter)
      .def("one_hot", &Tensor::one_hot)
      .def("dropout", &Tensor::dropout)
      .def("masked_fill", &Tensor::masked_fill)
      .def("sparse_categorical_crossentropy", &Tensor::sparse_categorical_crossentropy)
      .def("binary_cross_entropy", &Tensor::binary_cross_entropy)
      .def("binary_cross_entropy_with_logits", &Tensor::binary_cross_entropy_with_logits)
      .def("mse", &Tensor::mse)
      .def("scaled_dot_product_attention", &Tensor::scaled_dot_product_attention);
}

}  // namespace

void bind_tensor_ops(TensorClass& cls) {
  bind_elementwise(cls);
  bind_movement(cls);
  bind_reductions(cls);
}

}  // namespace baregrad::python
