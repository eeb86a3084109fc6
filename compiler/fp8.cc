#include "compiler/fp8.h"

#include <cmath>
#include <limits>

#include "base/check.h"

namespace baregrad::compiler {

Fp8Format fp8_format(DType t) {
  CHECK(dtypes::is_fp8(t)) << t.name();
  switch (t.scalar) {
    case Scalar::kFp8e4m3:
      return Fp8Format{3, 7, 0x7e, 0x7f};
    case Scalar::kFp8e5m2:
      return Fp8Format{2, 15, 0x7b, 0x7c};
    case Scalar::kFp8e4m3fnuz:
      return Fp8Format{3, 8, 0x7f, 0x80};
    default:
      return Fp8Format{2, 16, 0x7f, 0x80};
  }
}

uint8_t fp8_encode(DType t, double v) {
  const Fp8Format f = fp8_format(t);
  const int sign = std::signbit(v) ? 0x80 : 0;
  const bool fnuz = dtypes::is_fp8_fnuz(t);
  if (fnuz && !std::isfinite(v)) return 0x80;
  if (std::isnan(v)) return static_cast<uint8_t>(sign | 0x7f);
  if (std::isinf(v)) return static_cast<uint8_t>(sign | f.overflow_code);
  double a = std::fabs(v);
  if (a == 0) return static_cast<uint8_t>(fnuz ? 0 : sign);
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  // Exponent of the quantum: that of the subnormals below the smallest normal, 2^(1-bias-mant).
  int q = std::max(e - 1, 1 - f.bias) - f.mant;
  // NOTE: scaling by a power of two is exact; nearbyint rounds to nearest even by default.
  int64_t n = static_cast<int64_t>(std::nearbyint(std::ldexp(a, -q)));
  // n counts quanta: a subnormal's code is n itself (q + bias + mant - 1 == 0); a normal's adds
  // the binades above the first, and a carry out of the mantissa moves to the next exponent.
  int64_t code = n + (static_cast<int64_t>(q + f.bias + f.mant - 1) << f.mant);
  if (fnuz) return static_cast<uint8_t>(code > f.max_code ? 0x80 : code == 0 ? 0 : sign | code);
  if (code > f.max_code) code = f.overflow_code;
  return static_cast<uint8_t>(sign | code);
}

double fp8_decode(DType t, uint8_t code) {
  const Fp8Format f = fp8_format(t);
  const bool neg = code & 0x80;
  const int mag = code & 0x7f, exp = mag >> f.mant, mant = mag & ((1 << f.mant) - 1);
  double v;
  if (dtypes::is_fp8_fnuz(t) && code == 0x80) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (t.scalar == Scalar::kFp8e4m3 && mag == 0x7f) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (t.scalar == Scalar::kFp8e5m2 && exp == 31) {
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (exp == 0) {
    v = std::ldexp(mant, 1 - f.bias - f.mant);
  } else {
    v = std::ldexp(mant + (1 << f.mant), exp - f.bias - f.mant);
  }
  return neg ? -v : v;
}

double fp8_round(DType t, double v) { return fp8_decode(t, fp8_encode(t, v)); }

}  // namespace baregrad::compiler
