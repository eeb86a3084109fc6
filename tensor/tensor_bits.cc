// Integer (bitwise, shifts, Python // and %), rounding, trig and classification ops with
// tinygrad's semantics. Integer and rounding ops have a zero gradient; cos and tan compose sin.
#include <cmath>
#include <numbers>
#include <string>

#include "base/error.h"
#include "tensor/tensor.h"

namespace baregrad::tensor {

// Defined in tensor.cc: the broadcasting, promoting ALU node builder.
Tensor binary(const char* name, Op op, const Tensor& a, const Tensor& b, DType out);

namespace {
using compiler::least_upper_dtype;
using compiler::least_upper_float;
using Grads = std::vector<std::optional<Tensor>>;

bool int_or_bool(DType t) { return dtypes::is_int(t) || dtypes::is_bool(t); }

// Throws unless both operands are int or bool tensors.
void check_bitwise(const char* op, const Tensor& a, const Tensor& b) {
  if (!int_or_bool(a.dtype()) || !int_or_bool(b.dtype()))
    fail(op,
         std::string("needs int or bool tensors, got ") + a.dtype().name() + " and " +
             b.dtype().name(),
         ErrorKind::kType);
}

// Throws unless `a` is an int tensor and 0 <= n < its bit width.
void check_shift(const char* op, const Tensor& a, int n) {
  if (!dtypes::is_int(a.dtype()))
    fail(op, std::string("needs an int tensor, got ") + a.dtype().name(), ErrorKind::kType);
  int bits = a.dtype().itemsize() * 8;
  if (n < 0 || n >= bits)
    fail(op,
         "shift " + std::to_string(n) + " out of range [0, " + std::to_string(bits) + ") for " +
             a.dtype().name(),
         ErrorKind::kValue);
}

// The promoted dtype of an integer division; bools divide as int32.
DType div_dtype(const char* op, const Tensor& a, const Tensor& b) {
  DType t = least_upper_dtype(a.dtype(), b.dtype());
  if (!dtypes::is_float(t) && !int_or_bool(t))
    fail(op, std::string("unsupported dtypes ") + a.dtype().name() + " and " + b.dtype().name(),
         ErrorKind::kType);
  return dtypes::is_bool(t) ? dtypes::kInt32 : t;
}
}  // namespace

// ---- bitwise -----------------------------------------------------------------------------------

Tensor Tensor::bitwise_and(const Tensor& o) const {
  check_bitwise("bitwise_and", *this, o);
  return binary("bitwise_and", Op::AND, *this, o, {});
}
Tensor Tensor::bitwise_or(const Tensor& o) const {
  check_bitwise("bitwise_or", *this, o);
  return binary("bitwise_or", Op::OR, *this, o, {});
}
Tensor Tensor::bitwise_xor(const Tensor& o) const {
  check_bitwise("bitwise_xor", *this, o);
  return binary("bitwise_xor", Op::XOR, *this, o, {});
}
Tensor Tensor::bitwise_not() const {
  check_bitwise("bitwise_not", *this, *this);
  if (dtypes::is_bool(dtype())) return logical_not();
  return bitwise_xor(scalar_like(-1));
}
Tensor Tensor::lshift(int n) const {
  check_shift("lshift", *this, n);
  return binary("lshift", Op::SHL, *this, scalar_like(n), {});
}
Tensor Tensor::rshift(int n) const {
  check_shift("rshift", *this, n);
  return binary("rshift", Op::SHR, *this, scalar_like(n), {});
}

// ---- Python division ---------------------------------------------------------------------------

Tensor Tensor::idiv(const Tensor& o) const {
  DType t = div_dtype("idiv", *this, o);
  Tensor x = cast(t), y = o.cast(t);
  if (dtypes::is_float(t)) return (x / y).floor();
  // The hardware traps on x / 0 and INT_MIN / -1: divide by 1 there and patch the result
  // (x // 0 is 0, as numpy gives; x // -1 is -x, wrapping).
  Tensor zero = x.scalar_like(0), by0 = y.eq(zero), neg1 = y.eq(y.scalar_like(-1));
  Tensor ys = dtypes::is_unsigned(t) ? where(by0, y.scalar_like(1), y)
                                     : where(by0.logical_or(neg1), y.scalar_like(1), y);
  Tensor q = binary("idiv", Op::IDIV, x, ys, {});
  if (dtypes::is_unsigned(t)) return where(by0, zero, q);
  // C truncates; step down when the remainder is nonzero and its sign differs from the divisor's.
  Tensor r = binary("idiv", Op::MOD, x, ys, {});
  Tensor fix = r.ne(zero).logical_and(r.lt(zero).ne(y.lt(zero)));
  return where(by0, zero, where(neg1, -x, where(fix, q - 1.0, q)));
}

Tensor Tensor::mod(const Tensor& o) const {
  DType t = div_dtype("mod", *this, o);
  Tensor x = cast(t), y = o.cast(t);
  if (dtypes::is_float(t)) return x - x.idiv(y) * y;
  // As in idiv, never let the hardware see x % 0 or INT_MIN % -1 (x % 0 is 0, as numpy gives).
  Tensor zero = x.scalar_like(0), by0 = y.eq(zero);
  Tensor bad = dtypes::is_unsigned(t) ? by0 : by0.logical_or(y.eq(y.scalar_like(-1)));
  Tensor r = binary("mod", Op::MOD, x, where(bad, y.scalar_like(1), y), {});
  if (dtypes::is_unsigned(t)) return r;
  Tensor fix = r.ne(zero).logical_and(r.lt(zero).ne(y.lt(zero)));
  return where(fix, r + y, r);
}

// ---- rounding ----------------------------------------------------------------------------------

Tensor Tensor::trunc() const {
  if (!dtypes::is_float(dtype())) return *this;
  return record(lazy_alu(Op::TRUNC, lazies(lazy()), dtype()), "trunc", {*this},
                [](const Tensor& g) { return Grads{zeros_like(g)}; });
}
Tensor Tensor::floor() const {
  if (!dtypes::is_float(dtype())) return *this;
  Tensor t = trunc();
  return where(lt(t), t - 1.0, t);
}
Tensor Tensor::ceil() const {
  if (!dtypes::is_float(dtype())) return *this;
  Tensor t = trunc();
  return where(t.lt(*this), t + 1.0, t);
}
Tensor Tensor::round() const {
  if (!dtypes::is_float(dtype())) return *this;
  // Exact: x - trunc(x) and trunc(x) / 2 are representable, so no step can round wrongly.
  Tensor t = trunc(), d = (*this - t).detach();
  Tensor ad = where(d.lt(scalar_like(0)), -d, d), half = scalar_like(0.5);
  Tensor t2 = t.detach() * 0.5, odd = t2.trunc().ne(t2);
  Tensor up = half.lt(ad).logical_or(ad.eq(half).logical_and(odd));
  return where(up, where(lt(scalar_like(0)), t - 1.0, t + 1.0), t);
}

// ---- trig and classification -------------------------------------------------------------------

Tensor Tensor::cos() const {
  // sin(pi/2 - x), as tinygrad: the gradient, sin(pi/2 - (pi/2 - x)), then rounds back to
  // exactly x where x is large (|x| >= 1e4 in float32), where sin(x + pi/2) twice would not.
  Tensor x = cast(least_upper_float(dtype()));
  return (-x + std::numbers::pi / 2).sin();
}
Tensor Tensor::tan() const { return sin() / cos(); }

Tensor Tensor::isnan() const {
  if (!dtypes::is_float(dtype()))
    return full(shape(), 0, dtypes::kBool, lazy().base->device->name());
  return detach().ne(detach());
}
Tensor Tensor::isinf(bool detect_positive, bool detect_negative) const {
  Tensor out = full(shape(), 0, dtypes::kBool, lazy().base->device->name());
  if (!dtypes::is_float(dtype())) return out;
  Tensor x = detach();
  if (detect_positive) out = out.logical_or(x.eq(scalar_like(INFINITY)));
  if (detect_negative) out = out.logical_or(x.eq(scalar_like(-INFINITY)));
  return out;
}
Tensor Tensor::isfinite() const { return isinf().logical_or(isnan()).logical_not(); }

}  // namespace baregrad::tensor
