// Tensor movement ops, reductions and matmul.
#include <algorithm>
#include <numeric>

#include "base/error.h"
#include "compiler/view_ops.h"
#include "tensor/tensor.h"

namespace baregrad::tensor {
namespace {
using Grads = std::vector<std::optional<Tensor>>;
}  // namespace

int Tensor::norm_axis(const char* name, int axis, int n) const {
  if (axis < -n || axis >= n)
    fail(name, "axis " + std::to_string(axis) + " out of range for shape " + shape_str(shape()),
         ErrorKind::kIndex);
  return axis < 0 ? axis + n : axis;
}

std::vector<int> Tensor::norm_axes(const char* name, std::vector<int> axes) const {
  if (ndim() == 0) {  // a 0-d tensor takes axis 0 or -1 (torch, tinygrad) and reduces over none
    for (int a : axes) norm_axis(name, a, 1);
    return {};
  }
  if (axes.empty()) {
    axes.resize(ndim());
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (int& a : axes) a = norm_axis(name, a, ndim());
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    fail(name, "repeated axis for shape " + shape_str(shape()), ErrorKind::kValue);
  return axes;
}

// ---- movement ----------------------------------------------------------------------------------

Tensor Tensor::reshape(Shape s) const {
  auto infer = std::count(s.begin(), s.end(), -1);
  if (infer > 1) fail("reshape", "more than one -1 in " + shape_str(s), ErrorKind::kValue);
  if (infer == 1) {
    int64_t known = 1;
    for (int64_t d : s)
      if (d != -1) known *= d;
    if (known == 0 || numel() % known != 0)
      fail("reshape", "cannot reshape " + shape_str(shape()) + " to " + shape_str(s),
           ErrorKind::kValue);
    *std::find(s.begin(), s.end(), -1) = numel() / known;
  }
  if (s == shape()) return *this;
  Shape from = shape();
  return record(lazy_view(impl_->lazy, compiler::reshape(impl_->lazy.st, s)), "reshape", {*this},
                [from](const Tensor& g) { return Grads{g.reshape(from)}; });
}

Tensor Tensor::permute(std::vector<int> order) const {
  if (static_cast<int>(order.size()) != ndim())
    fail("permute",
         "order of " + std::to_string(order.size()) + " axes for shape " + shape_str(shape()),
         ErrorKind::kValue);
  for (int& a : order) a = norm_axis("permute", a, ndim());
  std::vector<int> inverse(order.size());
  for (size_t i = 0; i < order.size(); i++) inverse[order[i]] = static_cast<int>(i);
  return record(lazy_view(impl_->lazy, compiler::permute(impl_->lazy.st, order)), "permute",
                {*this}, [inverse](const Tensor& g) { return Grads{g.permute(inverse)}; });
}

Tensor Tensor::expand(Shape s) const {
  if (s.size() < shape().size())
    fail("expand", "cannot expand " + shape_str(shape()) + " to " + shape_str(s),
         ErrorKind::kValue);
  Shape cur(s.size() - shape().size(), 1);
  cur.insert(cur.end(), shape().begin(), shape().end());
  for (size_t i = 0; i < s.size(); i++)
    if (s[i] == -1) s[i] = cur[i];
  Tensor t = reshape(cur);
  if (s == cur) return t;
  std::vector<int> grown;  // the broadcast dims sum their gradient back
  for (size_t i = 0; i < s.size(); i++)
    if (cur[i] != s[i]) grown.push_back(static_cast<int>(i));
  return record(lazy_view(t.impl_->lazy, compiler::expand(t.impl_->lazy.st, s)), "expand", {t},
                [grown](const Tensor& g) { return Grads{g.sum(grown, true)}; });
}

Tensor Tensor::pad(std::vector<std::pair<int64_t, int64_t>> before_after) const {
  Shape from = shape();
  std::vector<std::pair<int64_t, int64_t>> back;
  for (size_t i = 0; i < before_after.size() && i < from.size(); i++)
    back.push_back({before_after[i].first, before_after[i].first + from[i]});
  return record(lazy_view(impl_->lazy, compiler::pad(impl_->lazy.st, before_after)), "pad", {*this},
                [back](const Tensor& g) { return Grads{g.shrink(back)}; });
}

Tensor Tensor::shrink(std::vector<std::pair<int64_t, int64_t>> ranges) const {
  Shape from = shape();
  std::vector<std::pair<int64_t, int64_t>> back;
  for (size_t i = 0; i < ranges.size() && i < from.size(); i++)
    back.push_back({ranges[i].first, from[i] - ranges[i].second});
  return record(lazy_view(impl_->lazy, compiler::shrink(impl_->lazy.st, ranges)), "shrink", {*this},
                [back](const Tensor& g) { return Grads{g.pad(back)}; });
}

Tensor Tensor::flip(std::vector<int> axes) const {
  std::vector<bool> f(ndim(), false);
  for (int a : norm_axes("flip", axes)) f[a] = true;
  std::vector<int> flipped = norm_axes("flip", axes);
  return record(lazy_view(impl_->lazy, compiler::flip(impl_->lazy.st, f)), "flip", {*this},
                [flipped](const Tensor& g) { return Grads{g.flip(flipped)}; });
}

Tensor Tensor::transpose(int a, int b) const {
  std::vector<int> order(ndim());
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[norm_axis("transpose", a, ndim())], order[norm_axis("transpose", b, ndim())]);
  return permute(order);
}

Tensor Tensor::unsqueeze(int axis) const {
  Shape s = shape();
  s.insert(s.begin() + norm_axis("unsqueeze", axis, ndim() + 1), 1);
  return reshape(s);
}

Tensor Tensor::squeeze(int axis) const {
  int a = norm_axis("squeeze", axis, ndim());
  if (shape()[a] != 1)
    fail("squeeze", "axis " + std::to_string(axis) + " of " + shape_str(shape()) + " is not 1",
         ErrorKind::kValue);
  Shape s = shape();
  s.erase(s.begin() + a);
  return reshape(s);
}

// ---- reductions --------------------------------------------------------------------------------

Tensor Tensor::reduce(const char* name, Op op, std::vector<int> axes, bool keepdim) const {
  axes = norm_axes(name, axes);
  Tensor out = *this;
  if (!axes.empty()) {
    Lazy r = lazy_reduce(op, impl_->lazy, axes);
    Shape full = shape();
    Tensor x = detach(), y(r);
    BackwardFn fn = [full](const Tensor& g) { return Grads{g.expand(full)}; };
    if (op == Op::MAX)  // the maxima share the gradient evenly
      fn = [full, axes, x, y](const Tensor& g) {
        Tensor hit = x.eq(y.expand(full)).cast(g.dtype());
        return Grads{hit * (g / hit.sum(axes, true)).expand(full)};
      };
    out = record(std::move(r), name, {*this}, std::move(fn));
  }
  if (keepdim) return out;
  Shape s;
  for (int i = 0; i < ndim(); i++)
    if (!std::count(axes.begin(), axes.end(), i)) s.push_back(shape()[i]);
  return out.reshape(s);
}

Tensor Tensor::sum(std::vector<int> axes, bool keepdim) const {
  // tinygrad's accumulation dtypes: small ints sum as (u)int32, half floats in float32.
  DType t = dtype(), acc = t;
  if (dtypes::is_bool(t) || t.scalar == compiler::Scalar::kInt8 ||
      t.scalar == compiler::Scalar::kInt16)
    acc = dtypes::kInt32;
  if (t.scalar == compiler::Scalar::kUint8 || t.scalar == compiler::Scalar::kUint16)
    acc = dtypes::kUint32;
  if (t.scalar == compiler::Scalar::kFloat16 || t.scalar == compiler::Scalar::kBFloat16)
    acc = dtypes::kFloat32;
  Tensor s = cast(acc).reduce("sum", Op::ADD, axes, keepdim);
  return dtypes::is_float(t) ? s.cast(t) : s;
}

Tensor Tensor::max(std::vector<int> axes, bool keepdim) const {
  return reduce("max", Op::MAX, axes, keepdim);
}

Tensor Tensor::min(std::vector<int> axes, bool keepdim) const {
  return -((-*this).max(axes, keepdim));
}

Tensor Tensor::mean(std::vector<int> axes, bool keepdim) const {
  std::vector<int> ax = norm_axes("mean", axes);
  int64_t n = 1;
  for (int a : ax) n *= shape()[a];
  Tensor s = cast(compiler::least_upper_float(dtype())).sum(ax, keepdim);
  return s / static_cast<double>(std::max<int64_t>(n, 1));
}

// ---- matmul ------------------------------------------------------------------------------------

Tensor Tensor::matmul(const Tensor& o) const {
  if (ndim() == 0 || o.ndim() == 0) fail("matmul", "scalar operand", ErrorKind::kValue);
  Tensor a = ndim() == 1 ? unsqueeze(0) : *this;
  Tensor b = o.ndim() == 1 ? o.unsqueeze(1) : o;
  int64_t k = a.shape().back(), kb = b.shape()[b.ndim() - 2];
  if (k != kb)
    fail("matmul",
         "inner dims differ: " + shape_str(shape()) + " @ " + shape_str(o.shape()) + " (" +
             std::to_string(k) + " vs " + std::to_string(kb) + ")",
         ErrorKind::kValue);
  // (..., n, 1, k) * (..., 1, m, k) summed over k: one fused multiply-reduce kernel.
  Tensor x = a.unsqueeze(-2);
  Tensor y = b.transpose(-2, -1).unsqueeze(-3);
  Tensor out = (x * y).sum({-1});
  if (ndim() == 1) out = out.squeeze(-2);
  if (o.ndim() == 1) out = out.squeeze(-1);
  return out;
}

}  // namespace baregrad::tensor

namespace baregrad::tensor {

// ---- activations and losses --------------------------------------------------------------------

Tensor Tensor::softmax(int axis) const {
  Tensor e = (*this - max({axis}, true).detach()).exp();
  return e / e.sum({axis}, true);
}

Tensor Tensor::log_softmax(int axis) const {
  Tensor shifted = *this - max({axis}, true).detach();
  return shifted - shifted.exp().sum({axis}, true).log();
}

Tensor Tensor::sparse_categorical_crossentropy(const Tensor& labels) const {
  if (ndim() < 1)
    fail("sparse_categorical_crossentropy", "logits must have a class axis", ErrorKind::kValue);
  Shape want(shape().begin(), shape().end() - 1);
  if (labels.shape() != want)
    fail("sparse_categorical_crossentropy",
         "labels of shape " + shape_str(labels.shape()) + " for logits of shape " +
             shape_str(shape()) + " (want " + shape_str(want) + ")",
         ErrorKind::kValue);
  if (dtypes::is_float(labels.dtype()))
    fail("sparse_categorical_crossentropy", "labels must be integers, got " + labels.dtype().name(),
         ErrorKind::kType);
  int64_t classes = shape().back();
  Tensor onehot =
      labels.unsqueeze(-1).eq(Tensor::arange(0, static_cast<double>(classes), 1, labels.dtype()));
  Tensor picked = (log_softmax(-1) * onehot.cast(dtype())).sum({-1});
  return -picked.mean();
}

}  // namespace baregrad::tensor
