// Tensor: a lazy, immutable n-dimensional array with tinygrad's semantics. Ops build a graph;
// realize() (or reading the data) schedules it into fused kernels and runs them on the device.
// Misuse (bad shapes, dtypes, axes) throws baregrad::Error("[op] ...") naming the values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/dtype.h"
#include "tensor/autograd.h"
#include "tensor/lazy.h"

namespace baregrad::tensor {

using Shape = std::vector<int64_t>;
namespace dtypes = compiler::dtypes;

std::string shape_str(const Shape& s);

class Tensor {
 public:
  // ---- creation ------------------------------------------------------------------------------
  // Copies `data` (row-major, numel(shape) values) to the device as `dtype`.
  static Tensor from_data(const std::vector<double>& data,
                          Shape shape,
                          DType dtype = dtypes::kFloat32,
                          std::string_view device = {});
  static Tensor full(Shape shape,
                     double value,
                     DType dtype = dtypes::kFloat32,
                     std::string_view device = {});
  static Tensor zeros(Shape shape, DType dtype = dtypes::kFloat32) { return full(shape, 0, dtype); }
  static Tensor ones(Shape shape, DType dtype = dtypes::kFloat32) { return full(shape, 1, dtype); }
  // [start, stop) in steps of `step`.
  static Tensor arange(double start, double stop, double step = 1, DType dtype = dtypes::kInt32);
  // Seeds the counter-based generator: values depend only on the seed and the call order,
  // not on the device or the thread count.
  static void manual_seed(uint64_t seed);
  static Tensor rand(Shape shape, DType dtype = dtypes::kFloat32);   // uniform [0, 1)
  static Tensor randn(Shape shape, DType dtype = dtypes::kFloat32);  // standard normal
  static Tensor uniform(Shape shape, double lo, double hi, DType dtype = dtypes::kFloat32);

  // ---- properties ----------------------------------------------------------------------------
  const Shape& shape() const { return impl_->lazy.shape(); }
  DType dtype() const { return impl_->lazy.dtype(); }
  int ndim() const { return static_cast<int>(shape().size()); }
  int64_t numel() const { return impl_->lazy.numel(); }
  const Lazy& lazy() const { return impl_->lazy; }

  // ---- autograd ------------------------------------------------------------------------------
  bool requires_grad() const { return impl_->requires_grad; }
  // Marks a leaf as needing gradients; returns *this.
  Tensor& requires_grad_(bool on = true);
  // The gradient backward() accumulated into this tensor, if any.
  std::optional<Tensor> grad() const;
  // Gradients of this scalar with respect to every tensor that requires them, accumulated into
  // their grad(). A non-scalar needs `grad_out` of its shape.
  void backward(std::optional<Tensor> grad_out = std::nullopt) const;
  // Gradients of this scalar with respect to `targets`, without touching grad().
  std::vector<Tensor> gradient(const std::vector<Tensor>& targets) const;
  // The same values with no gradient history.
  Tensor detach() const { return Tensor(impl_->lazy); }
  // Replaces this tensor's value (same shape and dtype) in every copy of it, dropping its
  // history; optimizers update parameters this way. Realizes `value`.
  void assign(const Tensor& value);
  // Forgets the gradient backward() accumulated (optimizers' zero_grad).
  void clear_grad() { impl_->grad.reset(); }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

  // ---- elementwise (broadcasting, dtype promotion as tinygrad) --------------------------------
  Tensor operator+(const Tensor& o) const;
  Tensor operator-(const Tensor& o) const;
  Tensor operator*(const Tensor& o) const;
  Tensor operator/(const Tensor& o) const;  // true division: integers give float32
  Tensor operator+(double v) const;
  Tensor operator-(double v) const;
  Tensor operator*(double v) const;
  Tensor operator/(double v) const;
  Tensor operator-() const;
  Tensor maximum(const Tensor& o) const;
  Tensor minimum(const Tensor& o) const;
  Tensor lt(const Tensor& o) const;  // bool
  Tensor eq(const Tensor& o) const;
  Tensor ne(const Tensor& o) const;
  // cond ? a : b, broadcasting all three.
  static Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
  Tensor cast(DType dtype) const;
  Tensor relu() const;
  Tensor exp() const;
  Tensor exp2() const;
  Tensor log() const;
  Tensor log2() const;
  Tensor sqrt() const;
  Tensor sin() const;
  Tensor reciprocal() const;
  Tensor sigmoid() const;
  Tensor square() const { return *this * *this; }
  Tensor softmax(int axis = -1) const;
  Tensor log_softmax(int axis = -1) const;
  // Mean negative log-likelihood of integer `labels` (this tensor's shape without its last
  // axis) under the logits in this tensor's last axis.
  Tensor sparse_categorical_crossentropy(const Tensor& labels) const;

  // ---- movement (views; never copies) ---------------------------------------------------------
  Tensor reshape(Shape shape) const;  // one dim may be -1
  Tensor permute(std::vector<int> order) const;
  Tensor expand(Shape shape) const;  // size-1 dims grow; -1 keeps a dim
  Tensor pad(std::vector<std::pair<int64_t, int64_t>> before_after) const;  // zeros
  Tensor shrink(std::vector<std::pair<int64_t, int64_t>> ranges) const;
  Tensor flip(std::vector<int> axes) const;
  Tensor transpose(int a = -2, int b = -1) const;
  Tensor flatten() const { return reshape({numel()}); }
  Tensor unsqueeze(int axis) const;
  Tensor squeeze(int axis) const;
  // A view-free copy (a kernel that writes this tensor's elements in row-major order).
  Tensor contiguous() const;

  // ---- reductions ----------------------------------------------------------------------------
  // Over `axes` (all when empty; negative counts from the end).
  Tensor sum(std::vector<int> axes = {}, bool keepdim = false) const;
  Tensor max(std::vector<int> axes = {}, bool keepdim = false) const;
  Tensor min(std::vector<int> axes = {}, bool keepdim = false) const;
  Tensor mean(std::vector<int> axes = {}, bool keepdim = false) const;

  // ---- linear algebra ------------------------------------------------------------------------
  // (..., n, k) @ (..., k, m), batch dims broadcast; 1-D operands as numpy.
  Tensor matmul(const Tensor& o) const;

  // ---- convolution and pooling (tensor_conv.cc) -------------------------------------------------
  // Sliding windows over the last len(kernel) axes: (..., i...) -> (..., o..., k...), with
  // o = (i - dilation*(k-1) - 1) / stride + 1. Built from movement ops only (differentiable).
  Tensor pool_windows(const std::vector<int64_t>& kernel,
                      const std::vector<int64_t>& stride,
                      const std::vector<int64_t>& dilation) const;
  // x (N, C, H, W) * weight (O, C/groups, KH, KW) [+ bias (O,)] -> (N, O, OH, OW).
  Tensor conv2d(const Tensor& weight,
                const std::optional<Tensor>& bias = std::nullopt,
                int64_t stride = 1,
                int64_t padding = 0,
                int64_t dilation = 1,
                int64_t groups = 1) const;
  // Over the last two axes; stride defaults to the kernel size.
  Tensor max_pool2d(int64_t kernel = 2, int64_t stride = 0) const;
  Tensor avg_pool2d(int64_t kernel = 2, int64_t stride = 0) const;

  // ---- data ----------------------------------------------------------------------------------
  // Schedules and runs every kernel this tensor needs; returns *this.
  const Tensor& realize() const;
  // The elements in row-major order, converted to double (realizes first).
  std::vector<double> to_vector() const;

 private:
  explicit Tensor(Lazy l) : impl_(std::make_shared<TensorImpl>()) { impl_->lazy = std::move(l); }
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  // `out`, recording `fn` as its backward when any of `parents` requires grad.
  static Tensor record(Lazy out, const char* op, const std::vector<Tensor>& parents, BackwardFn fn);
  friend std::vector<Tensor> run_backward(const Tensor& root,
                                          const Tensor& seed,
                                          const std::vector<Tensor>* targets);
  friend Tensor binary(const char* name, Op op, const Tensor& a, const Tensor& b, DType out);
  Tensor scalar_like(double v) const;
  Tensor unary(Op op) const;
  Tensor reduce(const char* name, Op op, std::vector<int> axes, bool keepdim) const;
  std::vector<int> norm_axes(const char* name, std::vector<int> axes) const;
  int norm_axis(const char* name, int axis, int ndim) const;

  std::shared_ptr<TensorImpl> impl_;
};

// Broadcasts `a` and `b` to one shape (numpy rules); throws naming `op` and both shapes.
std::pair<Tensor, Tensor> broadcast(const char* op, const Tensor& a, const Tensor& b);

}  // namespace baregrad::tensor
