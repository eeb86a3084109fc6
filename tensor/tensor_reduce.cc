// Tensor reductions: sum and max as reduce nodes (with their backward rules), and the ones
// composed from them (min, mean, argmax, any, var, logsumexp, cumsum, prod, ...), which autograd
// covers without rules of their own.
#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "tensor/tensor.h"
#include "tensor/tensor_internal.h"

namespace baregrad::tensor {
namespace {
using Grads = std::vector<std::optional<Tensor>>;

// tinygrad's accumulation dtype for sums and products: small ints in (u)int32, half floats and
// fp8s in float32.
DType acc_dtype(DType t) {
  using compiler::Scalar;
  if (dtypes::is_bool(t) || t.scalar == Scalar::kInt8 || t.scalar == Scalar::kInt16)
    return dtypes::kInt32;
  if (t.scalar == Scalar::kUint8 || t.scalar == Scalar::kUint16) return dtypes::kUint32;
  if (t.scalar == Scalar::kFloat16 || t.scalar == Scalar::kBFloat16 || dtypes::is_fp8(t))
    return dtypes::kFloat32;
  return t;
}

}  // namespace

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
  DType t = dtype();
  Tensor s = cast(acc_dtype(t)).reduce("sum", Op::ADD, axes, keepdim);
  return dtypes::is_float(t) ? s.cast(t) : s;
}

Tensor Tensor::max(std::vector<int> axes, bool keepdim) const {
  return reduce("max", Op::MAX, axes, keepdim);
}

Tensor Tensor::min(std::vector<int> axes, bool keepdim) const {
  return order_inverse(order_inverse(*this).max(axes, keepdim));
}

namespace {
// The element count of `axes` of `t` when one of them has a symbolic size, else nullopt.
std::optional<compiler::Sym> sym_count(const Tensor& t, const std::vector<int>& axes) {
  std::optional<std::vector<compiler::Sym>> s = t.sym_shape();
  if (!s) return std::nullopt;
  compiler::Sym n = 1;
  for (int a : axes) n = n * (*s)[a];
  if (n.is_const()) return std::nullopt;
  return n;
}
}  // namespace

Tensor Tensor::mean(std::vector<int> axes, bool keepdim) const {
  std::vector<int> ax = norm_axes("mean", axes);
  int64_t n = 1;
  for (int a : ax) n *= shape()[a];
  Tensor s = cast(compiler::least_upper_float(dtype())).sum(ax, keepdim);
  if (std::optional<compiler::Sym> count = sym_count(*this, ax))  // the size at launch
    return s / sym_scalar(*count, sym_vals(), s.dtype(), device()).maximum(s.scalar_like(1));
  return s / static_cast<double>(std::max<int64_t>(n, 1));
}

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
  Tensor rev = (-arange_on(*this, n) + static_cast<double>(n)).reshape(col);
  // max propagates NaN and NaN equals nothing: then the first NaN is the hit (numpy, torch).
  Tensor hit = x.eq(x.max({ax}, true));
  if (dtypes::is_float(dtype())) hit = hit.logical_or(x.ne(x));
  Tensor r = where(hit, rev, rev.scalar_like(0)).max({ax}, keepdim);
  return (-r + static_cast<double>(n)).cast(dtypes::kInt32);
}

Tensor Tensor::argmin(std::optional<int> axis, bool keepdim) const {
  if (!axis) return flatten().argmin(0);
  if (shape()[norm_axis("argmin", *axis, ndim())] == 0)
    fail("argmin", "axis " + std::to_string(*axis) + " of " + shape_str(shape()) + " is empty",
         ErrorKind::kValue);
  return order_inverse(detach()).argmax(axis, keepdim);
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
  if (std::optional<compiler::Sym> count = sym_count(*this, ax)) {
    Tensor c = sym_scalar(*count, sym_vals(), sq.dtype(), device());
    return sq.sum(ax, keepdim) / (c - correction).maximum(sq.scalar_like(0));
  }
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

namespace {
// A scan along more elements than this runs in blocks (see blocked_scan): the masked scan below
// costs n^2 per row, which over GPT-2's 50257 logits was seconds per multinomial draw.
constexpr int64_t kScanBlock = 256;

// cumsum (or cumprod) along the last axis of `x` in O(n * kScanBlock): a scan within blocks of
// kScanBlock, then a scan of the block totals (recursively, for very long axes), combined in.
// Padding at the end cannot change an earlier prefix, so zeros do for both.
Tensor blocked_scan(const Tensor& x, bool prod) {
  const Shape& s = x.shape();
  const size_t nd = s.size();
  int64_t n = s.back(), m = (n + kScanBlock - 1) / kScanBlock;
  auto whole = [&](size_t dims) {  // ranges keeping the first `dims` dims of s whole
    std::vector<std::pair<int64_t, int64_t>> r;
    for (size_t d = 0; d < dims; d++) r.push_back({0, s[d]});
    return r;
  };
  auto shape_with = [&](std::initializer_list<int64_t> tail) {  // s without its last dim, + tail
    Shape r(s.begin(), s.end() - 1);
    r.insert(r.end(), tail);
    return r;
  };
  std::vector<std::pair<int64_t, int64_t>> pads(nd, {0, 0});
  pads.back() = {0, m * kScanBlock - n};
  Tensor xb = x.pad(pads).reshape(shape_with({m, kScanBlock}));
  Tensor local = prod ? xb.cumprod(-1) : xb.cumsum(-1);  // within each block
  auto last_of_block = whole(nd - 1);
  last_of_block.push_back({0, m});
  last_of_block.push_back({kScanBlock - 1, kScanBlock});
  Tensor totals = local.shrink(last_of_block).reshape(shape_with({m}));
  // The exclusive scan of the totals: the identity, then the scan of all but the last block.
  auto all_but_last = whole(nd - 1);
  all_but_last.push_back({0, m - 1});
  Tensor first = Tensor::full(shape_with({1}), prod ? 1 : 0, totals.dtype(), totals.device());
  Tensor before = Tensor::cat({first, totals.shrink(all_but_last)}, -1);
  Tensor offsets = (prod ? before.cumprod(-1) : before.cumsum(-1)).unsqueeze(-1);
  Tensor out = prod ? local * offsets : local + offsets;
  auto keep = whole(nd - 1);
  keep.push_back({0, n});
  return out.reshape(shape_with({m * kScanBlock})).shrink(keep);
}
}  // namespace

Tensor Tensor::cumsum(int axis) const {
  if (ndim() == 0) return reshape({1}).cumsum(0).reshape({});
  int ax = norm_axis("cumsum", axis, ndim());
  int64_t n = shape()[ax];
  if (n > kScanBlock) return blocked_scan(transpose(ax, -1), false).transpose(ax, -1);
  // out[i] = sum over j of (j <= i ? x[j] : 0): a lower-triangular mask on a new axis.
  Tensor i = arange_on(*this, n).reshape({n, 1}), j = arange_on(*this, n).reshape({1, n});
  Tensor x = transpose(ax, -1).unsqueeze(-2);
  Tensor out = where(i.lt(j).logical_not(), x, scalar_like(0)).sum({-1});
  return out.transpose(ax, -1);
}

Tensor Tensor::cumprod(int axis) const {
  if (ndim() == 0) return reshape({1}).cumprod(0).reshape({});
  int ax = norm_axis("cumprod", axis, ndim());
  int64_t n = shape()[ax];
  if (n > kScanBlock) return blocked_scan(transpose(ax, -1), true).transpose(ax, -1);
  // out[i] = prod over j of (j <= i ? x[j] : 1): a lower-triangular mask on a new axis.
  Tensor i = arange_on(*this, n).reshape({n, 1}), j = arange_on(*this, n).reshape({1, n});
  Tensor x = transpose(ax, -1).unsqueeze(-2);
  return where(i.lt(j), scalar_like(1), x).prod({-1}).transpose(ax, -1);
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
        arange_on(*this, p).lt(const_like(*this, static_cast<double>(n), dtypes::kInt32));
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

}  // namespace baregrad::tensor
