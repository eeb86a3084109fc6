// Tensor: a lazy, immutable n-dimensional array with tinygrad's semantics. Ops build a graph;
// realize() (or reading the data) schedules it into fused kernels and runs them on the device.
// Misuse (bad shapes, dtypes, axes) throws baregrad::Error("[op] ...") naming the values.
#pragma once

#include <cstdint>
#include <optional>
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

class Tensor;

// One entry of Tensor::operator[]: an integer (picks and drops an axis), a slice (Python's
// start:stop:step), none() (a new size-1 axis), ellipsis() (the axes not otherwise indexed) or an
// integer tensor (numpy advanced indexing).
class Idx {
 public:
  enum class Kind { kInt, kSlice, kNone, kEllipsis, kTensor };
  Idx(int64_t i) : kind_(Kind::kInt), int_(i) {}  // NOLINT: implicit, as x[{1, 2}]
  Idx(const Tensor& t);                           // NOLINT: implicit, as x[{t, 0}]
  static Idx none() { return Idx(Kind::kNone); }
  static Idx ellipsis() { return Idx(Kind::kEllipsis); }
  // start:stop:step; nullopt takes Python's default for the step's direction.
  static Idx slice(std::optional<int64_t> start = std::nullopt,
                   std::optional<int64_t> stop = std::nullopt,
                   int64_t step = 1);

  Kind kind() const { return kind_; }
  int64_t value() const { return int_; }  // kInt
  std::optional<int64_t> start() const { return start_; }
  std::optional<int64_t> stop() const { return stop_; }
  int64_t step() const { return step_; }
  const Tensor& tensor() const { return *tensor_; }  // kTensor

 private:
  explicit Idx(Kind k) : kind_(k) {}
  Kind kind_;
  int64_t int_ = 0;
  std::optional<int64_t> start_, stop_;
  int64_t step_ = 1;
  std::shared_ptr<const Tensor> tensor_;
};

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
  // A device buffer of `shape` with unspecified contents (nothing is written).
  static Tensor empty(Shape shape, DType dtype = dtypes::kFloat32, std::string_view device = {});
  // A tensor on the realized buffer that `view` reads, whole (tinygrad's Tensor(t.uop.buf_uop)):
  // writes into it are seen by every tensor on that buffer. Throws when `view`'s base is not
  // realized or assign() has overwritten it.
  static Tensor of_buffer(const Lazy& view);
  static Tensor zeros(Shape shape, DType dtype = dtypes::kFloat32) { return full(shape, 0, dtype); }
  static Tensor ones(Shape shape, DType dtype = dtypes::kFloat32) { return full(shape, 1, dtype); }
  // [start, stop) in steps of `step`. Integer values that `dtype` holds exactly (int dtypes,
  // float32 to 2**24, float64 to 2**53) are computed inside the kernels that read them, from the
  // element index: no buffer and no host work. Others are computed on the host in float64.
  static Tensor arange(double start,
                       double stop,
                       double step = 1,
                       DType dtype = dtypes::kInt32,
                       std::string_view device = {});
  // Seeds tinygrad's generator (tensor/random.cc): after manual_seed(s), the same calls on the
  // same devices (in the same order) give tinygrad's numbers, whatever the thread count.
  static void manual_seed(uint64_t seed);
  // Uniform [0, 1) in a float dtype, from the next words of `device`'s stream.
  static Tensor rand(Shape shape, DType dtype = dtypes::kFloat32, std::string_view device = {});
  // Standard normal: Box-Muller over a float32 rand((2, *shape)).
  static Tensor randn(Shape shape, DType dtype = dtypes::kFloat32, std::string_view device = {});
  // (hi - lo) * float32 rand, cast to `dtype`, + lo; needs lo < hi.
  static Tensor uniform(Shape shape,
                        double lo,
                        double hi,
                        DType dtype = dtypes::kFloat32,
                        std::string_view device = {});

  // ---- properties ----------------------------------------------------------------------------
  const Shape& shape() const { return impl_->lazy.shape(); }
  DType dtype() const { return impl_->lazy.dtype(); }
  int ndim() const { return static_cast<int>(shape().size()); }
  int64_t numel() const { return impl_->lazy.numel(); }
  const Lazy& lazy() const { return impl_->lazy; }

  // ---- autograd ------------------------------------------------------------------------------
  // True only when gradients must flow here (tinygrad's requires_grad=True).
  bool requires_grad() const { return impl_->mode == GradMode::kOn; }
  // tinygrad's tri-state: nullopt (None, the default: a gradient can be asked for), true, false.
  std::optional<bool> requires_grad_state() const;
  // Marks this tensor as needing gradients (or not); returns *this. Setting true or false on a
  // tensor whose history was recorded only because its inputs were undecided makes it a leaf
  // (a parameter made by `randn(...) * 0.1`, say).
  Tensor& requires_grad_(bool on = true);
  Tensor& set_requires_grad(std::optional<bool> on);
  // No recorded history: created tensors, parameters, detach()ed and realized undecided ones.
  bool is_leaf() const { return !impl_->node; }
  // The gradient backward() accumulated into this tensor, if any.
  std::optional<Tensor> grad() const;
  // Gradients of this scalar accumulated into grad() of the leaves of its graph that require
  // grad; when none does, of every float leaf that is not requires_grad=false or a constant
  // (tinygrad: every such tensor); and of the tensors marked retain_grad(). A non-scalar needs
  // `grad_out` of its shape. A grad() already there is updated in place: the same tensor
  // object holds the sum (tinygrad's t.grad.assign(t.grad + g)).
  void backward(std::optional<Tensor> grad_out = std::nullopt) const;
  // Gradients of this scalar with respect to `targets` (any float tensors of its graph that are
  // not requires_grad=false), without touching grad(). A float target the graph does not reach
  // gets zeros, as in tinygrad; a requires_grad=false or integer target throws unless
  // `materialize`, which gives zeros for it too.
  std::vector<Tensor> gradient(const std::vector<Tensor>& targets, bool materialize = false) const;
  // backward() fills grad() of this tensor though it is not a leaf (torch's retain_grad).
  void retain_grad() const { impl_->retain_grad = true; }
  // The Python bindings count the objects holding this tensor (TensorImpl::py_handles).
  void count_handle(int d) const { impl_->py_handles += d; }
  // The same values with no gradient history, requires_grad=false.
  Tensor detach() const;
  // tinygrad's detach(): the same values as a new undecided leaf (requires_grad None) that
  // backward() fills like any leaf; no gradient flows into this tensor, and backward() through
  // the leaf gives this tensor (while alive) zeros, as tinygrad's toposort reaches it.
  Tensor detached_leaf() const;
  // A view of another tensor's buffer (t[1:], t.T) is written through instead: write_view.
  // Replaces this tensor's value (same shape and dtype) in every copy of it, dropping its
  // history, and realizes it. A tensor that is a whole realized buffer is updated in place
  // (the buffer keeps its address, which a TinyJit replay relies on); lazy work still reading
  // the old contents keeps seeing them. See assign_all.
  void assign(const Tensor& value);
  // Assigns every (target, value) pair in one schedule, so work the values share runs once.
  // Before a buffer is overwritten, the live unrealized tensors reading it keep its old
  // contents: those no larger than the buffer (a loss read after an optimizer step, say) are
  // realized in the same schedule; larger ones (the activations an autograd graph holds) stay
  // lazy and read a copy of the buffer made first. A tensor that aliases the buffer without a
  // kernel of its own (a detach() copy) throws if read afterwards.
  static void assign_all(const std::vector<std::pair<Tensor, Tensor>>& updates);
  // setitem's write: stores `value` (same shape and dtype) into the elements of the buffer this
  // tensor views, realizing its base first, so every view of that base sees it (torch's and
  // tinygrad's shared storage). Throws for views that cannot be written (padded, broadcast,
  // multi-view reshapes). A view of a constant has no storage: it gets a new value (assign)
  // and the other views of that constant throw when read.
  void write_view(const Tensor& value, const char* op = "setitem");
  // True when this tensor's value is lazy work (no buffer yet) that no other tensor or lazy op
  // refers to: setitem can give it a new value (a graph, with gradients) instead of writing
  // storage that nothing else could see.
  bool value_unshared() const {
    const Lazy& l = lazy();
    return !l.base->realized && l.base.use_count() == 1 && !is_bitcast_view(l);
  }
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
  // `op` of this tensor and the number `v` (`v op this` when `reverse`), `v` as scalar_like makes
  // it: a constant that never takes a gradient. One call for what Python's `t + 1` does; op is
  // add, sub, mul, maximum, minimum, lt, le, gt, ge, eq or ne (Error naming it otherwise).
  Tensor scalar_op(std::string_view op, double v, bool reverse = false) const;
  Tensor operator-() const;
  Tensor maximum(const Tensor& o) const;
  Tensor minimum(const Tensor& o) const;
  Tensor lt(const Tensor& o) const;  // bool
  Tensor eq(const Tensor& o) const;
  Tensor ne(const Tensor& o) const;
  // cond ? a : b, broadcasting all three.
  static Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
  Tensor cast(DType dtype) const;
  // The same bits read as `dtype` (same itemsize), lazily; no gradient. The result is a view: an
  // assign or setitem into all of it writes into this tensor (torch's view(dtype), tinygrad's).
  Tensor bitcast(DType dtype) const;
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
  // Symbolic shapes: sizes and bounds that may hold Variables (compiler/sym.h) bound to `vals`.
  // The result has the sizes at those values; its kernels are compiled once for every value.
  Tensor expand_sym(const std::vector<compiler::Sym>& shape, const compiler::Bindings& vals) const;
  Tensor shrink_sym(const std::vector<std::pair<compiler::Sym, compiler::Sym>>& ranges,
                    const compiler::Bindings& vals) const;
  Tensor pad_sym(const std::vector<std::pair<compiler::Sym, compiler::Sym>>& before_after,
                 const compiler::Bindings& vals) const;
  // A 0-d tensor whose value is `value` over Variables bound to `vals`: kernels reading it take
  // the Variables at launch (one program for every value).
  static Tensor sym_scalar(const compiler::Sym& value,
                           const compiler::Bindings& vals,
                           DType dtype,
                           std::string_view device = {});
  // The shape with its Variables when it holds one (nullopt: concrete), and their values.
  std::optional<std::vector<compiler::Sym>> sym_shape() const;
  compiler::Bindings sym_vals() const;
  Tensor transpose(int a = -2, int b = -1) const;
  Tensor flatten() const { return reshape({numel()}); }
  Tensor unsqueeze(int axis) const;
  Tensor squeeze(int axis) const;
  // A view-free copy: always a kernel of its own that writes this tensor row-major (never fused
  // into its readers), as tinygrad's.
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

  // ---- composed creation (tensor.cc; rand_like, randint and normal in random.cc) ----
  // n x m identity (m = n when negative) on the default device.
  static Tensor eye(int64_t n, int64_t m = -1, DType dtype = dtypes::kFloat32);
  // `steps` evenly spaced values from start to stop, both included (stop exactly).
  static Tensor linspace(double start, double stop, int64_t steps, DType dtype = dtypes::kFloat32);
  // Constants of `t`'s shape, dtype and device.
  static Tensor zeros_like(const Tensor& t);
  static Tensor ones_like(const Tensor& t);
  static Tensor full_like(const Tensor& t, double value);
  // Uniform [0, 1) of `t`'s shape, (float) dtype and device, from the seeded generator.
  static Tensor rand_like(const Tensor& t);
  // Uniform integers in [low, high) from the seeded generator; dtype must be an integer.
  static Tensor randint(Shape shape,
                        int64_t low = 0,
                        int64_t high = 10,
                        DType dtype = dtypes::kInt32,
                        std::string_view device = {});
  // mean + std * randn(shape); dtype must be a float.
  static Tensor normal(Shape shape,
                       double mean = 0,
                       double std = 1,
                       DType dtype = dtypes::kFloat32,
                       std::string_view device = {});

  // ---- composed elementwise ops and activations (tensor_elementwise.cc) ----
  // Elementwise, broadcasting and promoting like the ops above.
  // |x|, with gradient sign(x) (0 at 0).
  Tensor abs() const;
  // -1, 0 or 1 in this dtype; NaN stays NaN; the gradient is 0.
  Tensor sign() const;
  // x ** e; a negative x with a non-integer e gives NaN, x ** 0 is 1, int ** int stays int.
  Tensor pow(const Tensor& e) const;
  // x ** e; integer and half-integer e by exact multiplies (and one sqrt), as tinygrad.
  Tensor pow(double e) const;
  // min(max(x, lo), hi).
  Tensor clamp(double lo, double hi) const;
  // x + (end - x) * weight.
  Tensor lerp(const Tensor& end, const Tensor& weight) const;
  Tensor lerp(const Tensor& end, double weight) const;
  // Bool comparisons as tinygrad: gt is o < x, ge is not (x < o), le is not (o < x).
  Tensor gt(const Tensor& o) const;
  Tensor ge(const Tensor& o) const;
  Tensor le(const Tensor& o) const;
  // Bool logic; other dtypes are cast to bool first (nonzero is true).
  Tensor logical_not() const;
  Tensor logical_and(const Tensor& o) const;
  Tensor logical_or(const Tensor& o) const;
  // Activations, as tinygrad's (gelu is the tanh approximation; softplus cannot overflow).
  Tensor tanh() const;
  Tensor leaky_relu(double slope = 0.01) const;
  Tensor gelu() const;
  Tensor quick_gelu() const;
  Tensor silu() const;
  Tensor softplus(double beta = 1) const;
  Tensor mish() const;
  Tensor elu(double alpha = 1) const;
  Tensor selu() const;
  Tensor hardswish() const;
  Tensor relu6() const;
  Tensor hardtanh(double lo = -1, double hi = 1) const;

  // ---- composed reductions (tensor_reduce.cc) ----
  // int32 index of the first maximum (minimum) along `axis`, of the flattened tensor when
  // none; an empty axis throws.
  Tensor argmax(std::optional<int> axis = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int> axis = std::nullopt, bool keepdim = false) const;
  // Bool: whether any (all) elements over `axes` are nonzero; empty gives false (true).
  Tensor any(std::vector<int> axes = {}, bool keepdim = false) const;
  Tensor all(std::vector<int> axes = {}, bool keepdim = false) const;
  // Sum of squared deviations over `axes` / max(0, n - correction); std is its sqrt.
  Tensor var(std::vector<int> axes = {}, bool keepdim = false, double correction = 1) const;
  Tensor std(std::vector<int> axes = {}, bool keepdim = false, double correction = 1) const;
  // log(sum(exp(x))) over `axes`, shifted by the max so that it cannot overflow.
  Tensor logsumexp(std::vector<int> axes = {}, bool keepdim = false) const;
  // Running sum along `axis`, in sum()'s accumulation dtype.
  Tensor cumsum(int axis = 0) const;
  // Product over `axes` by multiplies only (no logs): exact for ints, zeros and signs kept.
  Tensor prod(std::vector<int> axes = {}, bool keepdim = false) const;
  // Running product along `axis` by multiplies only (exact for ints, zeros and signs kept).
  Tensor cumprod(int axis = 0) const;

  // ---- composed movement (tensor_shape.cc) ----
  // Joins along `axis`: shapes equal outside it, dtypes promote.
  static Tensor cat(const std::vector<Tensor>& ts, int axis = 0);
  // Joins equal shapes along a new `axis`.
  static Tensor stack(const std::vector<Tensor>& ts, int axis = 0);
  // Views of `size` along `axis` (the last may be smaller). NOTE: split({n}) picks this one.
  std::vector<Tensor> split(int64_t size, int axis = 0) const;
  // Views of the given sizes, which must sum to the length of `axis`.
  std::vector<Tensor> split(const std::vector<int64_t>& sizes, int axis = 0) const;
  // split(ceil(n / chunks)): at most `chunks` views.
  std::vector<Tensor> chunk(int64_t chunks, int axis = 0) const;
  // Tiles repeats[i] times along dim i; extra leading repeats add dims.
  Tensor repeat(const std::vector<int64_t>& repeats) const;
  // out[i] = x[(i - shift) mod n] along `axis`, of the flattened tensor when none.
  Tensor roll(int64_t shift, std::optional<int> axis = std::nullopt) const;
  // Merges dims start..end (inclusive, negative from the end) into one.
  Tensor flatten(int start, int end = -1) const;
  // Splits `axis` into `sizes` (one may be -1).
  Tensor unflatten(int axis, const Shape& sizes) const;
  // Pads (before, after) per dim with mode "constant" (value), "reflect", "replicate" or
  // "circular"; negative amounts crop first.
  Tensor pad_mode(std::vector<std::pair<int64_t, int64_t>> before_after,
                  std::string_view mode = "constant",
                  double value = 0) const;
  // Python's x[start:stop:step] along `axis` (negative indices and steps; nullopt = default).
  Tensor slice(int axis,
               std::optional<int64_t> start,
               std::optional<int64_t> stop,
               int64_t step = 1) const;

  // ---- losses, dropout, attention and einsum (tensor_nn.cc) ----
  // Mean BCE of probabilities (this) against `target`; logs are clamped at -100 as torch's.
  Tensor binary_cross_entropy(const Tensor& target) const;
  // Mean BCE of logits (this), as softplus(x) - x * target: finite for any x.
  Tensor binary_cross_entropy_with_logits(const Tensor& target) const;
  // Mean of (this - target)^2.
  Tensor mse(const Tensor& target) const;
  // Zeroes each element with probability p and scales the rest by 1 / (1 - p); the identity
  // when !training or p == 0, zeros when p == 1.
  Tensor dropout(double p = 0.5, bool training = true) const;
  // softmax(q k^T / sqrt(d) + mask) v for q (..., L, d), key (..., S, d), value (..., S, dv);
  // a bool mask keeps where true, a float mask adds; is_causal masks j > i with -inf.
  Tensor scaled_dot_product_attention(const Tensor& key,
                                      const Tensor& value,
                                      const std::optional<Tensor>& attn_mask = std::nullopt,
                                      bool is_causal = false) const;
  // numpy einsum without diagonals ("ii"): implicit or explicit output, "..." and size-1
  // broadcasting; a product of broadcast views summed over the dropped indices.
  static Tensor einsum(const std::string& formula, const std::vector<Tensor>& operands);

  // ---- integer, rounding and trig ops (tensor_bits.cc) ----
  // Bitwise ops of int or bool tensors (broadcasting, promoting); others throw.
  Tensor bitwise_and(const Tensor& o) const;
  Tensor bitwise_or(const Tensor& o) const;
  Tensor bitwise_xor(const Tensor& o) const;
  // ~x for ints, logical not for bools.
  Tensor bitwise_not() const;
  // x << n and x >> n (arithmetic for signed) of an int tensor, 0 <= n < bits.
  Tensor lshift(int n) const;
  Tensor rshift(int n) const;
  // Python's //: ints round toward negative infinity (bools count as int32), floats floor(a / b).
  Tensor idiv(const Tensor& o) const;
  // Python's %: the result has the divisor's sign; floats a - floor(a / b) * b.
  Tensor mod(const Tensor& o) const;
  // Rounding of floats (ints unchanged), gradient 0; round() is half to even.
  Tensor trunc() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;
  // cos(x) = sin(x + pi / 2), tan = sin / cos; differentiable.
  Tensor cos() const;
  Tensor tan() const;
  // Bool classification; ints are never NaN or infinite.
  Tensor isnan() const;
  Tensor isinf(bool detect_positive = true, bool detect_negative = true) const;
  Tensor isfinite() const;

  // ---- indexing (tensor_index.cc) ----
  // numpy/tinygrad x[...]: ints drop their axis (negative from the end; out of range throws),
  // slices are views, none() adds an axis, one ellipsis() stands for the remaining axes.
  // Integer tensors broadcast together and pick elements by one-hot masks (differentiable); their
  // dims replace the indexed axes when those are adjacent, else lead the result. Ints count as
  // basic indices there (torch/tinygrad; numpy would treat x[:, t, :, 0] as non-adjacent).
  // Negative tensor values wrap once; out-of-range ones give 0 (the data is never read). Bool
  // (mask) index tensors throw: their result shape would depend on the data.
  Tensor operator[](const std::vector<Idx>& idx) const;
  Tensor operator[](int64_t i) const;
  Tensor operator[](const Tensor& t) const;
  // out[i][j] = x[i][index[i][j]] for axis 1; index has this ndim; out-of-range picks 0.
  Tensor gather(int axis, const Tensor& index) const;
  // int32 (..., num_classes) with a 1 at each value; -1 means max() + 1 (realizes).
  Tensor one_hot(int64_t num_classes = -1) const;
  // `value` where mask (broadcast, nonzero is true) is set, this tensor elsewhere.
  Tensor masked_fill(const Tensor& mask, double value) const;
  // A copy with out[i][index[i][j]] = src[i][j] for axis 1 (torch/tinygrad scatter); index and
  // src have this ndim. Of duplicate indices the last along `axis` wins; out-of-range ones skip.
  Tensor scatter(int axis, const Tensor& index, const Tensor& src) const;
  // x[i0, i1, ...]: the leading dims picked (negative from the end), the rest kept.
  Tensor index(const std::vector<int64_t>& idx) const;

  // ---- data ----------------------------------------------------------------------------------
  // Schedules and runs every kernel this tensor needs; returns *this.
  const Tensor& realize() const;
  // The elements in row-major order, converted to double (realizes first).
  std::vector<double> to_vector() const;

  // ---- host data (tensor_host.cc) ----
  // A new realized tensor on `device` holding a copy of `bytes` raw little-endian elements of
  // `dtype` (exact for every dtype); `bytes` must equal numel(shape) * dtype.itemsize().
  static Tensor from_bytes(
      const void* data, size_t bytes, Shape shape, DType dtype, std::string_view device = {});
  // The caller's memory at `data` used in place (no copy) as a realized tensor of `shape` and
  // `dtype` on `device`, which must address host memory (the CPU devices; others throw): the
  // tensor reads what the memory holds when a kernel runs, and writes into it. The caller
  // keeps the memory alive while any tensor or view of it lives (tinygrad's from_blob).
  static Tensor from_blob(void* data, Shape shape, DType dtype, std::string_view device = {});
  // The elements in row-major order as their exact raw bytes (realizes first).
  std::vector<uint8_t> to_bytes() const;
  // This tensor's elements read in place from host-addressable device memory.
  struct HostView {
    std::shared_ptr<const DeviceBuffer> owner;  // keeps the memory alive
    const void* data = nullptr;                 // element [0, 0, ...]
    Shape shape;
    std::vector<int64_t> strides;  // in elements; 0 for broadcast dims, negative for flips
  };
  // Realizes this tensor and waits for its device; returns its elements in place when the
  // device's memory is host-addressable (CPU) and the tensor is one strided window of its
  // buffer (no padding); nullopt otherwise (use to_bytes()). A later assign() into the buffer
  // shows through the view once the device has run it (host_view() again waits for that).
  std::optional<HostView> host_view() const;
  // The name of the device this tensor lives on, e.g. "CPU".
  std::string device() const;
  // A copy on `device` (this tensor when it is there already); the gradient flows back.
  Tensor to(std::string_view device) const;
  // Replaces the gradient backward() accumulated; nullopt clears it.
  void set_grad(const std::optional<Tensor>& g);

 private:
  explicit Tensor(Lazy l) : impl_(std::make_shared<TensorImpl>()) { impl_->lazy = std::move(l); }
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  // `out`, recording `fn` as its backward when any of `parents` may need grad (see autograd.h).
  static Tensor record(Lazy out, const char* op, const std::vector<Tensor>& parents, BackwardFn fn);
  friend std::vector<Tensor> run_backward(const Tensor& root,
                                          const Tensor& seed,
                                          const std::vector<Tensor>* targets,
                                          bool materialize,
                                          const char* op,
                                          bool graph);
  friend class TinyJit;
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
