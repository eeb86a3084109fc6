// More Tensor ops (tinygrad's names and semantics), each composed from the primitive Tensor ops
// so that autograd covers them without backward rules of their own.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

#include "base/error.h"
#include "tensor/tensor.h"

namespace baregrad::tensor {
namespace {
using compiler::least_upper_dtype;
using compiler::least_upper_float;

std::string device_of(const Tensor& t) { return t.lazy().base->device->name(); }

// A scalar constant of dtype `dt` on `t`'s device.
Tensor const_like(const Tensor& t, double v, DType dt) {
  return Tensor::full({}, v, dt, device_of(t));
}

// 0, 1, ..., n-1 as int32 on `t`'s device.
Tensor arange_like(const Tensor& t, int64_t n) {
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), 0.0);
  return Tensor::from_data(v, {n}, dtypes::kInt32, device_of(t));
}

Tensor as_float(const Tensor& t) { return t.cast(least_upper_float(t.dtype())); }

// tinygrad's accumulation dtype for sums and products.
DType acc_dtype(DType t) {
  using compiler::Scalar;
  if (dtypes::is_bool(t) || t.scalar == Scalar::kInt8 || t.scalar == Scalar::kInt16)
    return dtypes::kInt32;
  if (t.scalar == Scalar::kUint8 || t.scalar == Scalar::kUint16) return dtypes::kUint32;
  if (t.scalar == Scalar::kFloat16 || t.scalar == Scalar::kBFloat16) return dtypes::kFloat32;
  return t;
}

}  // namespace

// ---- elementwise -------------------------------------------------------------------------------

Tensor Tensor::sign() const {
  if (dtypes::is_bool(dtype())) return *this;
  Tensor zero = *this * 0.0;  // keeps a (zero) gradient path; NaN stays NaN
  Tensor pos = where(scalar_like(0).lt(*this), scalar_like(1), zero);
  if (dtypes::is_unsigned(dtype())) return pos;
  return where(lt(scalar_like(0)), scalar_like(-1), pos);
}

Tensor Tensor::abs() const {
  if (dtypes::is_bool(dtype()) || dtypes::is_unsigned(dtype())) return *this;
  return *this * sign();
}

Tensor Tensor::pow(double e) const {
  if (e < 0) return reciprocal().pow(-e).cast(dtype());
  if (e == 0)  // 1 everywhere (also for inf and NaN), with a zero gradient
    return where(Tensor::full(shape(), 1, dtypes::kBool, device_of(*this)), scalar_like(1),
                 *this * 0.0);
  if (e > 1 << 30) return pow(const_like(*this, e, least_upper_float(dtype())));
  double whole = std::floor(e);
  if (e - whole == 0.5) return pow(whole) * sqrt();
  if (e != whole) return pow(const_like(*this, e, least_upper_float(dtype())));
  auto n = static_cast<int64_t>(e);
  Tensor half = pow(static_cast<double>(n / 2)).square();
  return n % 2 ? half * *this : half;
}

Tensor Tensor::pow(const Tensor& exponent) const {
  auto [b0, e0] = broadcast("pow", *this, exponent);
  DType t = least_upper_dtype(dtype(), exponent.dtype());
  bool ints = !dtypes::is_float(t);
  DType f = ints ? dtypes::kFloat64 : least_upper_float(t);  // int ** int exact up to 2**53
  Tensor b = b0.cast(f), e = e0.cast(f);
  Tensor ret = (e * b.abs().log2()).exp2();
  // Integer exponents: |e| >= 2**52 always is one; below, compare with its truncation.
  Tensor ed = e.detach(), big = ed.abs().lt(const_like(ed, 4503599627370496.0, f)).logical_not();
  Tensor small = where(big, const_like(ed, 0, f), ed);
  Tensor is_int = big.logical_or(small.eq(small.cast(dtypes::kInt64).cast(f)));
  Tensor half = small * 0.5;
  Tensor odd = big.logical_not().logical_and(half.ne(half.cast(dtypes::kInt64).cast(f)));
  Tensor neg = b.detach().lt(const_like(b, 0, f));
  ret = where(neg.logical_and(odd), -ret, ret);
  ret = where(neg.logical_and(is_int.logical_not()), const_like(ret, NAN, f), ret);
  ret = where(ed.eq(const_like(ed, 0, f)), const_like(ret, 1, f), ret);  // x ** 0 = 1
  if (!ints) return ret;
  // Back to int: round to nearest; |x| < 1 (int ** negative int) truncates to 0.
  Tensor zero = const_like(ret, 0, f);
  return where(ret.abs().lt(const_like(ret, 1, f)), zero, ret + ret.sign() * 0.5).cast(t);
}

Tensor Tensor::clamp(double lo, double hi) const {
  return maximum(scalar_like(lo)).minimum(scalar_like(hi));
}

Tensor Tensor::lerp(const Tensor& end, const Tensor& weight) const {
  auto [x, y] = broadcast("lerp", *this, end);
  broadcast("lerp", x, weight);
  return *this + (end - *this) * weight;
}

Tensor Tensor::lerp(const Tensor& end, double weight) const {
  broadcast("lerp", *this, end);
  return *this + (end - *this) * weight;
}

Tensor Tensor::gt(const Tensor& o) const {
  auto [a, b] = broadcast("gt", *this, o);
  return b.lt(a);
}
Tensor Tensor::ge(const Tensor& o) const {
  auto [a, b] = broadcast("ge", *this, o);
  return a.lt(b).logical_not();
}
Tensor Tensor::le(const Tensor& o) const {
  auto [a, b] = broadcast("le", *this, o);
  return b.lt(a).logical_not();
}

Tensor Tensor::logical_not() const {
  Tensor b = cast(dtypes::kBool);
  return b.ne(b.scalar_like(1));
}
Tensor Tensor::logical_and(const Tensor& o) const {
  auto [a, b] = broadcast("logical_and", cast(dtypes::kBool), o.cast(dtypes::kBool));
  return where(a, b, a.scalar_like(0));
}
Tensor Tensor::logical_or(const Tensor& o) const {
  auto [a, b] = broadcast("logical_or", cast(dtypes::kBool), o.cast(dtypes::kBool));
  return where(a, a.scalar_like(1), b);
}

// ---- activations -------------------------------------------------------------------------------

Tensor Tensor::tanh() const { return (as_float(*this) * 2.0).sigmoid() * 2.0 - 1.0; }
Tensor Tensor::leaky_relu(double slope) const {
  return where(lt(scalar_like(0)), *this * slope, *this);
}
Tensor Tensor::gelu() const {
  const double k = std::sqrt(2 / std::numbers::pi);
  Tensor x = as_float(*this);
  return x * 0.5 * ((x + x * x * x * 0.044715) * k).tanh() + x * 0.5;
}
Tensor Tensor::quick_gelu() const { return *this * (*this * 1.702).sigmoid(); }
Tensor Tensor::silu() const { return *this * sigmoid(); }
Tensor Tensor::softplus(double beta) const {
  // log(1 + e^(bx)) / b, as max(bx, 0) + log(1 + e^-|bx|) so that large |x| cannot overflow.
  // NOTE: maximum, not relu: its gradient 1/2 at 0 (abs' is 0 there) gives sigmoid(0) = 1/2.
  Tensor bx = as_float(*this) * beta;
  return (bx.maximum(bx.scalar_like(0)) + ((-bx.abs()).exp() + 1.0).log()) / beta;
}
Tensor Tensor::mish() const { return *this * softplus().tanh(); }
Tensor Tensor::elu(double alpha) const {
  return relu() - (-as_float(*this).exp() + 1.0).relu() * alpha;
}
Tensor Tensor::selu() const {
  constexpr double kAlpha = 1.6732632423543772, kScale = 1.0507009873554805;
  Tensor x = as_float(*this);
  return where(x.lt(x.scalar_like(0)), (x.exp() - 1.0) * kAlpha, x) * kScale;
}
Tensor Tensor::hardswish() const { return *this * (*this + 3.0).relu6() * (1.0 / 6); }
Tensor Tensor::relu6() const { return relu() - (*this - 6.0).relu(); }
Tensor Tensor::hardtanh(double lo, double hi) const { return clamp(lo, hi); }

// ---- reductions --------------------------------------------------------------------------------

Tensor Tensor::argmax(std::optional<int> axis, bool keepdim) const {
  if (!axis) return flatten().argmax(0);
  int ax = norm_axis("argmax", *axis, ndim());
  int64_t n = shape()[ax];
  if (n == 0)
    fail("argmax", "axis " + std::to_string(*axis) + " of " + shape_str(shape()) + " is empty",
         ErrorKind::kValue);
  Tensor x = dtypes::is_bool(dtype()) ? cast(dtypes::kInt32) : detach();
  // The first maximum has the largest n - index; n minus that is its index.
  Shape col(ndim() - ax, 1);
  col[0] = n;
  Tensor rev = (-arange_like(*this, n) + static_cast<double>(n)).reshape(col);
  Tensor hit = x.eq(x.max({ax}, true));
  Tensor r = where(hit, rev, rev.scalar_like(0)).max({ax}, keepdim);
  return (-r + static_cast<double>(n)).cast(dtypes::kInt32);
}

Tensor Tensor::argmin(std::optional<int> axis, bool keepdim) const {
  if (!axis) return flatten().argmin(0);
  if (shape()[norm_axis("argmin", *axis, ndim())] == 0)
    fail("argmin", "axis " + std::to_string(*axis) + " of " + shape_str(shape()) + " is empty",
         ErrorKind::kValue);
  if (dtypes::is_bool(dtype())) return logical_not().argmax(axis, keepdim);
  if (dtypes::is_int(dtype())) return (-cast(dtypes::kInt64)).argmax(axis, keepdim);
  return (-detach()).argmax(axis, keepdim);
}

Tensor Tensor::any(std::vector<int> axes, bool keepdim) const {
  norm_axes("any", axes);
  return cast(dtypes::kBool).sum(axes, keepdim).cast(dtypes::kBool);  // empty: false
}

Tensor Tensor::all(std::vector<int> axes, bool keepdim) const {
  norm_axes("all", axes);
  return logical_not().any(axes, keepdim).logical_not();
}

Tensor Tensor::var(std::vector<int> axes, bool keepdim, double correction) const {
  std::vector<int> ax = norm_axes("var", axes);
  int64_t n = 1;
  for (int a : ax) n *= shape()[a];
  Tensor x = as_float(*this);
  Tensor sq = (x - x.mean(ax, true)).square();
  return sq.sum(ax, keepdim) / std::max(0.0, static_cast<double>(n) - correction);
}

Tensor Tensor::std(std::vector<int> axes, bool keepdim, double correction) const {
  return var(axes, keepdim, correction).sqrt();
}

Tensor Tensor::logsumexp(std::vector<int> axes, bool keepdim) const {
  std::vector<int> ax = norm_axes("logsumexp", axes);
  Tensor x = as_float(*this);
  Tensor m = x.max(ax, true).detach();  // d/dm of the result is 0, so m needs no gradient
  Tensor inf = m.scalar_like(INFINITY);
  m = where(m.eq(inf).logical_or(m.eq(-inf)), m.scalar_like(0), m);
  Tensor r = (x - m).exp().sum(ax, keepdim).log();
  return r + m.reshape(r.shape());
}

Tensor Tensor::cumsum(int axis) const {
  if (ndim() == 0) return reshape({1}).cumsum(0).reshape({});
  int ax = norm_axis("cumsum", axis, ndim());
  int64_t n = shape()[ax];
  // out[i] = sum over j of (j <= i ? x[j] : 0): a lower-triangular mask on a new axis.
  Tensor i = arange_like(*this, n).reshape({n, 1}), j = arange_like(*this, n).reshape({1, n});
  Tensor x = transpose(ax, -1).unsqueeze(-2);
  Tensor out = where(i.lt(j).logical_not(), x, scalar_like(0)).sum({-1});
  return out.transpose(ax, -1);
}

Tensor Tensor::prod(std::vector<int> axes, bool keepdim) const {
  std::vector<int> ax = norm_axes("prod", axes);
  // Move the reduced axes last, flatten them, pad with ones to a power of two and multiply
  // halves: correctly rounded multiplies, exact for integers, zeros and signs kept.
  std::vector<int> order;
  Shape kept, kept_dims = shape();
  int64_t n = 1;
  for (int d = 0; d < ndim(); d++)
    if (!std::count(ax.begin(), ax.end(), d)) order.push_back(d), kept.push_back(shape()[d]);
  for (int a : ax) order.push_back(a), n *= shape()[a], kept_dims[a] = 1;
  DType acc = acc_dtype(dtype());
  Shape flat = kept;
  flat.push_back(n);
  Tensor x = cast(acc).permute(order).reshape(flat);
  int64_t p = 1;
  while (p < n) p *= 2;
  if (p != n) {
    std::vector<std::pair<int64_t, int64_t>> pads(flat.size(), {0, 0});
    pads.back() = {0, p - n};
    Tensor inside =
        arange_like(*this, p).lt(const_like(*this, static_cast<double>(n), dtypes::kInt32));
    x = where(inside, x.pad(pads), x.scalar_like(1));
  }
  std::vector<std::pair<int64_t, int64_t>> lo(flat.size()), hi(flat.size());
  for (size_t d = 0; d + 1 < flat.size(); d++) lo[d] = hi[d] = {0, flat[d]};
  for (; p > 1; p /= 2) {
    lo.back() = {0, p / 2};
    hi.back() = {p / 2, p};
    x = x.shrink(lo) * x.shrink(hi);
  }
  x = x.reshape(keepdim ? kept_dims : kept);
  return dtypes::is_float(dtype()) ? x.cast(dtype()) : x;
}

// ---- movement ----------------------------------------------------------------------------------

Tensor Tensor::cat(const std::vector<Tensor>& ts, int axis) {
  if (ts.empty()) fail("cat", "no tensors to concatenate", ErrorKind::kValue);
  const Tensor& first = ts[0];
  int ax = first.norm_axis("cat", axis, first.ndim());
  DType t = first.dtype();
  int64_t total = 0;
  for (const Tensor& x : ts) {
    bool same = x.ndim() == first.ndim();
    for (int d = 0; same && d < x.ndim(); d++) same = d == ax || x.shape()[d] == first.shape()[d];
    if (!same)
      fail("cat",
           "shapes " + shape_str(first.shape()) + " and " + shape_str(x.shape()) +
               " differ outside axis " + std::to_string(axis),
           ErrorKind::kValue);
    t = least_upper_dtype(t, x.dtype());
    total += x.shape()[ax];
  }
  DType sum_t = dtypes::is_bool(t) ? dtypes::kUint8 : t;  // bools add as 0/1 bytes
  std::vector<std::pair<int64_t, int64_t>> pads(first.ndim(), {0, 0});
  std::optional<Tensor> out;
  int64_t offset = 0;
  for (const Tensor& x : ts) {
    pads[ax] = {offset, total - offset - x.shape()[ax]};
    offset += x.shape()[ax];
    Tensor part = x.cast(sum_t).pad(pads);
    out = out ? *out + part : part;
  }
  return out->cast(t);
}

Tensor Tensor::stack(const std::vector<Tensor>& ts, int axis) {
  if (ts.empty()) fail("stack", "no tensors to stack", ErrorKind::kValue);
  int ax = ts[0].norm_axis("stack", axis, ts[0].ndim() + 1);
  std::vector<Tensor> parts;
  for (const Tensor& x : ts) {
    if (x.shape() != ts[0].shape())
      fail("stack",
           "shapes " + shape_str(ts[0].shape()) + " and " + shape_str(x.shape()) + " differ",
           ErrorKind::kValue);
    parts.push_back(x.unsqueeze(ax));
  }
  return cat(parts, ax);
}

std::vector<Tensor> Tensor::split(const std::vector<int64_t>& sizes, int axis) const {
  int ax = norm_axis("split", axis, ndim());
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) fail("split", "negative size in " + shape_str(sizes), ErrorKind::kValue);
    total += s;
  }
  if (total != shape()[ax])
    fail("split",
         "sizes " + shape_str(sizes) + " sum to " + std::to_string(total) + ", but axis " +
             std::to_string(axis) + " of " + shape_str(shape()) + " has " +
             std::to_string(shape()[ax]),
         ErrorKind::kValue);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t d : shape()) ranges.push_back({0, d});
  std::vector<Tensor> out;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    ranges[ax] = {offset, offset + s};
    offset += s;
    out.push_back(shrink(ranges));
  }
  return out;
}

std::vector<Tensor> Tensor::split(int64_t size, int axis) const {
  int ax = norm_axis("split", axis, ndim());
  if (size <= 0)
    fail("split", "size " + std::to_string(size) + " is not positive", ErrorKind::kValue);
  int64_t n = shape()[ax];
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < std::max<int64_t>(n, 1); i += size)
    sizes.push_back(std::min(size, n - i));
  return split(sizes, axis);
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int axis) const {
  int ax = norm_axis("chunk", axis, ndim());
  if (chunks <= 0)
    fail("chunk", "chunks " + std::to_string(chunks) + " is not positive", ErrorKind::kValue);
  int64_t n = shape()[ax];
  if (n == 0) return split(std::vector<int64_t>(chunks, 0), axis);
  return split((n + chunks - 1) / chunks, axis);
}

Tensor Tensor::repeat(const std::vector<int64_t>& repeats) const {
  if (static_cast<int>(repeats.size()) < ndim())
    fail("repeat",
         "repeats " + shape_str(repeats) + " for shape " + shape_str(shape()) + " (need at least " +
             std::to_string(ndim()) + ")",
         ErrorKind::kValue);
  Shape base(repeats.size() - ndim(), 1), unsq, expanded, out;
  base.insert(base.end(), shape().begin(), shape().end());
  for (size_t i = 0; i < repeats.size(); i++) {
    if (repeats[i] < 0)
      fail("repeat", "negative count in repeats " + shape_str(repeats), ErrorKind::kValue);
    unsq.insert(unsq.end(), {1, base[i]});
    expanded.insert(expanded.end(), {repeats[i], base[i]});
    out.push_back(repeats[i] * base[i]);
  }
  return reshape(unsq).expand(expanded).reshape(out);
}

Tensor Tensor::roll(int64_t shift, std::optional<int> axis) const {
  if (!axis) return flatten().roll(shift, 0).reshape(shape());
  int ax = norm_axis("roll", *axis, ndim());
  int64_t n = shape()[ax];
  if (n == 0 || shift % n == 0) return *this;
  int64_t s = ((shift % n) + n) % n;
  std::vector<int64_t> reps(ndim(), 1);
  reps[ax] = 2;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t d : shape()) ranges.push_back({0, d});
  ranges[ax] = {n - s, 2 * n - s};
  return repeat(reps).shrink(ranges);  // out[i] = x[(i - shift) mod n]
}

Tensor Tensor::gather(int axis, const Tensor& index) const {
  int ax = norm_axis("gather", axis, ndim());
  auto where_str = " for a tensor of shape " + shape_str(shape());
  if (!dtypes::is_int(index.dtype()))
    fail("gather", "index must be an integer tensor, got " + index.dtype().name(),
         ErrorKind::kType);
  if (index.ndim() != ndim())
    fail("gather", "index of shape " + shape_str(index.shape()) + where_str + ": ndims differ",
         ErrorKind::kValue);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int d = 0; d < ndim(); d++) {
    if (d != ax && index.shape()[d] > shape()[d])
      fail("gather",
           "index of shape " + shape_str(index.shape()) + where_str + " exceeds dim " +
               std::to_string(d),
           ErrorKind::kValue);
    ranges.push_back({0, d == ax ? shape()[d] : index.shape()[d]});
  }
  // x[..., j along axis ...] picked where j == index: a one-hot mask on a new last axis.
  Tensor x = shrink(ranges).unsqueeze(-1).transpose(-1, ax);
  Tensor hit = index.unsqueeze(-1).eq(arange_like(*this, shape()[ax]));
  return where(hit, x, scalar_like(0)).sum({-1}).cast(dtype());
}

Tensor Tensor::one_hot(int64_t num_classes) const {
  if (!dtypes::is_int(dtype()))
    fail("one_hot", "needs an integer tensor, got " + dtype().name() + " " + shape_str(shape()),
         ErrorKind::kType);
  if (num_classes < 0) {
    if (numel() == 0) fail("one_hot", "num_classes unknown for an empty tensor", ErrorKind::kValue);
    num_classes = static_cast<int64_t>(max().to_vector()[0]) + 1;
  }
  return unsqueeze(-1).eq(arange_like(*this, num_classes)).cast(dtypes::kInt32);
}

}  // namespace baregrad::tensor
