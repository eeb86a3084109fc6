// Elementwise ops composed from the primitive ALU ops of tensor.cc (tinygrad's names and
// semantics): sign, abs, pow, clamp, lerp, comparisons, logic and activations. Autograd covers
// them without backward rules of their own, except pow (its rule is torch's, below).
#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <vector>

#include "tensor/tensor.h"
#include "tensor/tensor_internal.h"

namespace baregrad::tensor {
namespace {
using compiler::least_upper_dtype;
using compiler::least_upper_float;
using Grads = std::vector<std::optional<Tensor>>;
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

namespace {

// x ** e with no history (x is detached): IEEE pow, integer exponents by repeated squaring.
Tensor pow_scalar_value(const Tensor& x, double e) {
  if (e < 0) return x.reciprocal().pow(-e).cast(x.dtype());
  if (e == 0)  // 1 everywhere (also for inf and NaN)
    return Tensor::where(Tensor::full(x.shape(), 1, dtypes::kBool, x.device()),
                         const_like(x, 1, x.dtype()), x);
  if (e > 1 << 30) return x.pow(const_like(x, e, least_upper_float(x.dtype())));
  double whole = std::floor(e);
  if (e - whole == 0.5) {
    // IEEE pow, unlike sqrt, is +inf at -inf and +0 at -0 for these exponents.
    Tensor r = x.pow(whole) * x.sqrt();
    Tensor zero = const_like(r, 0, r.dtype()), inf = const_like(r, INFINITY, r.dtype());
    Tensor neg_zero = x.eq(const_like(x, 0, x.dtype()))
                          .logical_and(x.reciprocal().lt(const_like(x, 0, x.dtype())));
    return Tensor::where(x.eq(const_like(x, -INFINITY, x.dtype())), inf,
                         Tensor::where(neg_zero, zero, r));
  }
  if (e != whole) return x.pow(const_like(x, e, least_upper_float(x.dtype())));
  auto n = static_cast<int64_t>(e);
  Tensor half = x.pow(static_cast<double>(n / 2)).square();
  return n % 2 ? half * x : half;
}

// b ** e in float dtype f with no history (b and e detached, both of dtype f): IEEE pow.
Tensor pow_tensor_value(const Tensor& b, const Tensor& e, DType f) {
  Tensor ret = (e * b.abs().log2()).exp2();
  // Integer exponents: |e| >= 2**52 always is one; below, compare with its truncation.
  Tensor big = e.abs().lt(const_like(e, 4503599627370496.0, f)).logical_not();
  Tensor small = Tensor::where(big, const_like(e, 0, f), e);
  Tensor is_int = big.logical_or(small.eq(small.cast(dtypes::kInt64).cast(f)));
  Tensor half = small * 0.5;
  Tensor odd =
      is_int.logical_and(big.logical_not()).logical_and(half.ne(half.cast(dtypes::kInt64).cast(f)));
  // IEEE pow: the sign bit of b (-0 included) flips odd powers; only finite b < 0 gives NaN
  // for a non-integer e; 1 ** e = 1 and (-1) ** +-inf = 1 (for NaN e too); x ** 0 = 1.
  Tensor zero_f = const_like(b, 0, f), one = const_like(ret, 1, f);
  Tensor neg = b.lt(zero_f), finite_neg = neg.logical_and(b.isinf().logical_not());
  Tensor sign_bit = neg.logical_or(b.eq(zero_f).logical_and(b.reciprocal().lt(zero_f)));
  ret = Tensor::where(sign_bit.logical_and(odd), -ret, ret);
  ret = Tensor::where(finite_neg.logical_and(is_int.logical_not()), const_like(ret, NAN, f), ret);
  Tensor unit = b.eq(const_like(b, 1, f)).logical_or(b.abs().eq(one).logical_and(e.isinf()));
  return Tensor::where(unit.logical_or(e.eq(const_like(e, 0, f))), one, ret);
}

}  // namespace

// The gradients are torch's (and tinygrad's POW rule), recorded directly rather than derived
// from the composition above, whose selects would turn NaN and infinite derivatives into 0:
//   d/db = e * b ** (e - 1), and 0 where e == 0;
//   d/de = b ** e * log(b) (NaN for b < 0), and 0 where b == 0 and e >= 0 (at b == +-0 and
//   e < 0 that is +-inf; tinygrad gives -inf for both signs of zero).
Tensor Tensor::pow(double e) const {
  Tensor xd = detach();
  Tensor y = pow_scalar_value(xd, e);
  if (!dtypes::is_float(y.dtype())) return y;
  return record(y.lazy(), "pow", {*this}, [x = *this, e, dt = y.dtype()](const Tensor& g) {
    if (e == 0) return Grads{Tensor::full(g.shape(), 0, g.dtype(), g.device())};
    return Grads{g * (saved(x).cast(dt).pow(e - 1) * e)};
  });
}

Tensor Tensor::pow(const Tensor& exponent) const {
  auto [b0, e0] = broadcast("pow", *this, exponent);
  DType t = least_upper_dtype(dtype(), exponent.dtype());
  bool ints = !dtypes::is_float(t);
  DType f = ints ? dtypes::kFloat64 : least_upper_float(t);  // int ** int exact up to 2**53
  Tensor b = b0.cast(f), e = e0.cast(f), bd = b.detach(), ed = e.detach();
  Tensor ret = pow_tensor_value(bd, ed, f);
  if (ints) {  // back to int: round to nearest; |x| < 1 (int ** negative int) truncates to 0
    Tensor zero = const_like(ret, 0, f);
    return where(ret.abs().lt(const_like(ret, 1, f)), zero, ret + ret.sign() * 0.5).cast(t);
  }
  return record(ret.lazy(), "pow", {b, e}, [b, e, ret, f](const Tensor& g) {
    Tensor bs = saved(b), es = saved(e), zero = const_like(bs, 0, f);
    Tensor r = saved_output(ret, [&] { return bs.pow(es); });
    Tensor bd = b.detach(), ed = e.detach();
    Tensor db = where(ed.eq(zero), zero, es * bs.pow(es - 1.0));
    Tensor de = where(bd.eq(zero).logical_and(ed.lt(zero).logical_not().logical_and(ed.eq(ed))),
                      zero, r * bs.log());
    return Grads{g * db, g * de};
  });
}

Tensor Tensor::clamp(double lo, double hi) const {
  if (dtypes::is_int(dtype())) {  // a bound outside the int range would wrap as a constant
    double dmin = compiler::dtypes::min_value(dtype()), dmax = compiler::dtypes::max_value(dtype());
    if (lo == std::trunc(lo)) lo = std::clamp(lo, dmin, dmax);
    if (hi == std::trunc(hi)) hi = std::clamp(hi, dmin, dmax);
  }
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
Tensor Tensor::hardswish() const {
  Tensor x = as_float(*this);
  return x * (x + 3.0).relu6() * (1.0 / 6);
}
Tensor Tensor::relu6() const {
  if (!dtypes::is_float(dtype())) return clamp(0, 6);  // x - 6 would wrap
  return relu() - (*this - 6.0).relu();
}
Tensor Tensor::hardtanh(double lo, double hi) const { return clamp(lo, hi); }

}  // namespace baregrad::tensor
