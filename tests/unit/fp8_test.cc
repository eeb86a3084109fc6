// fp8 conversions: the host functions of compiler/fp8.h against an oracle written here from the
// OCP OFP8 spec and the FNUZ formats' definition (decode by formula, encode by nearest grid value
// with ties to the even code), and
// the IR conversions of lower_fp8 (run by the reference interpreter) against the host ones.
#include "compiler/fp8.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "compiler/interp.h"
#include "compiler/passes/lower_fp8.h"

namespace baregrad::compiler {
namespace {

using dtypes::kFp8e4m3;
using dtypes::kFp8e4m3fnuz;
using dtypes::kFp8e5m2;
using dtypes::kFp8e5m2fnuz;

struct Spec {
  DType t;
  int ebits, mbits, bias;
  double next_after_max;  // the grid step past the largest finite value: overflow from there
  int overflow;           // the code overflow gives
  bool fnuz = false;      // every exponent finite, one zero, NaN at 0x80
};
const Spec kSpecs[] = {{kFp8e4m3, 4, 3, 7, 480.0, 0x7f},
                       {kFp8e5m2, 5, 2, 15, 65536.0, 0x7c},
                       {kFp8e4m3fnuz, 4, 3, 8, 256.0, 0x80, true},
                       {kFp8e5m2fnuz, 5, 2, 16, 65536.0, 0x80, true}};

double spec_decode(const Spec& s, int code) {
  int sign = code >> 7, e = (code >> s.mbits) & ((1 << s.ebits) - 1),
      m = code & ((1 << s.mbits) - 1);
  double nan = std::numeric_limits<double>::quiet_NaN(),
         inf = std::numeric_limits<double>::infinity();
  if (s.fnuz && code == 0x80) return nan;
  if (s.t == kFp8e4m3 && e == 15 && m == 7) return nan;
  if (s.t == kFp8e5m2 && e == 31) return m ? nan : (sign ? -inf : inf);
  double v = e == 0 ? m / std::pow(2.0, s.mbits) * std::pow(2.0, 1 - s.bias)
                    : (1 + m / std::pow(2.0, s.mbits)) * std::pow(2.0, e - s.bias);
  return sign ? -v : v;
}

int spec_encode(const Spec& s, double x) {
  int sign = std::signbit(x) ? 0x80 : 0;
  if (s.fnuz && !std::isfinite(x)) return 0x80;
  if (std::isnan(x)) return sign | 0x7f;
  double a = std::fabs(x);
  if (a >= s.next_after_max) return sign | s.overflow;
  int best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (int c = 0; c < 0x80; c++) {
    double v = spec_decode(s, c);
    if (!std::isfinite(v)) continue;
    double d = std::fabs(v - a);
    if (d < best_d || (d == best_d && (c & 1) == 0)) best = c, best_d = d;
  }
  double d_over = std::fabs(s.next_after_max - a);  // a tie goes to the even one of the two codes
  if (d_over < best_d || (d_over == best_d && (best & 1))) best = s.overflow;
  if (s.fnuz && best == 0) return 0;  // no negative zero
  return sign | best;
}

bool same(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b));
}

// float32 values across and past both fp8 ranges, each fp8 tie with its neighbours, specials.
std::vector<float> sweep() {
  std::vector<float> v;
  for (uint32_t b = 100u << 23; b < 146u << 23; b += 1u << 15) v.push_back(std::bit_cast<float>(b));
  for (const Spec& s : kSpecs)
    for (int c = 0; c < 0x7f; c++) {
      double lo = spec_decode(s, c), hi = c + 1 < 0x7f ? spec_decode(s, c + 1) : s.next_after_max;
      if (!std::isfinite(lo)) continue;
      if (!std::isfinite(hi)) hi = s.next_after_max;
      float mid = static_cast<float>((lo + hi) / 2);
      v.insert(v.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)});
    }
  v.insert(v.end(),
           {0.0f, 1e-45f, 1e-30f, 1e30f, std::numeric_limits<float>::max(),
            std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()});
  size_t n = v.size();
  for (size_t i = 0; i < n; i++) v.push_back(-v[i]);
  return v;
}

TEST(Fp8, DecodeAnchorsFromTheSpecTables) {
  EXPECT_EQ(fp8_decode(kFp8e4m3, 0x7e), 448.0);
  EXPECT_EQ(fp8_decode(kFp8e4m3, 0x38), 1.0);
  EXPECT_EQ(fp8_decode(kFp8e4m3, 0x08), std::ldexp(1.0, -6));  // smallest normal
  EXPECT_EQ(fp8_decode(kFp8e4m3, 0x01), std::ldexp(1.0, -9));  // smallest subnormal
  EXPECT_TRUE(std::isnan(fp8_decode(kFp8e4m3, 0x7f)) && std::isnan(fp8_decode(kFp8e4m3, 0xff)));
  EXPECT_EQ(fp8_decode(kFp8e4m3, 0x78), 256.0);  // exponent 15 is a normal binade in E4M3FN
  EXPECT_EQ(fp8_decode(kFp8e5m2, 0x7b), 57344.0);
  EXPECT_EQ(fp8_decode(kFp8e5m2, 0x3c), 1.0);
  EXPECT_EQ(fp8_decode(kFp8e5m2, 0x01), std::ldexp(1.0, -16));
  EXPECT_EQ(fp8_decode(kFp8e5m2, 0xfc), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(fp8_decode(kFp8e5m2, 0x7d)));
  EXPECT_TRUE(std::signbit(fp8_decode(kFp8e5m2, 0x80)));
  EXPECT_EQ(fp8_decode(kFp8e4m3fnuz, 0x7f), 240.0);  // exponent 15 holds finite values
  EXPECT_EQ(fp8_decode(kFp8e4m3fnuz, 0x40), 1.0);
  EXPECT_EQ(fp8_decode(kFp8e4m3fnuz, 0x01), std::ldexp(1.0, -10));
  EXPECT_EQ(fp8_decode(kFp8e4m3fnuz, 0xff), -240.0);
  EXPECT_EQ(fp8_decode(kFp8e5m2fnuz, 0x7f), 57344.0);
  EXPECT_EQ(fp8_decode(kFp8e5m2fnuz, 0x40), 1.0);
  EXPECT_EQ(fp8_decode(kFp8e5m2fnuz, 0x01), std::ldexp(1.0, -17));
  for (DType t : {kFp8e4m3fnuz, kFp8e5m2fnuz}) EXPECT_TRUE(std::isnan(fp8_decode(t, 0x80)));
}

TEST(Fp8, HostDecodeOfEveryCodeMatchesTheSpecFormula) {
  for (const Spec& s : kSpecs)
    for (int c = 0; c < 256; c++)
      EXPECT_TRUE(same(fp8_decode(s.t, static_cast<uint8_t>(c)), spec_decode(s, c)))
          << s.t.name() << " " << c;
}

TEST(Fp8, HostEncodeMatchesNearestEvenOnTheSweepAndFloat64Ties) {
  std::vector<double> xs;
  for (float f : sweep()) xs.push_back(f);
  for (double t : {1.0625, 1.125, 0.5 + std::ldexp(1.0, -6), 464.0, 61440.0, std::ldexp(1.0, -10),
                   std::ldexp(3.0, -11)})
    xs.insert(xs.end(), {t, std::nextafter(t, 0.0), std::nextafter(t, 1e300), -t});
  for (const Spec& s : kSpecs)
    for (double x : xs) EXPECT_EQ(fp8_encode(s.t, x), spec_encode(s, x)) << s.t.name() << " " << x;
  EXPECT_EQ(fp8_encode(kFp8e4m3, 464.0), 0x7e);  // tie to the even 448
  EXPECT_EQ(fp8_encode(kFp8e4m3, 465.0), 0x7f);  // past it: NaN (non-saturating)
  EXPECT_EQ(fp8_encode(kFp8e4m3, -INFINITY), 0xff);
  EXPECT_EQ(fp8_encode(kFp8e5m2, 61440.0), 0x7c);  // tie to the even code: infinity
  EXPECT_EQ(fp8_encode(kFp8e5m2, -0.0), 0x80);
  for (DType t : {kFp8e4m3fnuz, kFp8e5m2fnuz}) {
    EXPECT_EQ(fp8_encode(t, -0.0), 0x00);  // one zero
    EXPECT_EQ(fp8_encode(t, -1e-30), 0x00);
    EXPECT_EQ(fp8_encode(t, -INFINITY), 0x80);  // no infinity: NaN
  }
  EXPECT_EQ(fp8_encode(kFp8e4m3fnuz, 247.0), 0x7f);
  EXPECT_EQ(fp8_encode(kFp8e4m3fnuz, 249.0), 0x80);  // past the largest: NaN (non-saturating)
}

TEST(Fp8, IrConversionsMatchTheHostOnesBitForBit) {
  for (const Spec& s : kSpecs) {
    UOpPtr code = UOp::make(Op::DEFINE_VAR, dtypes::kUint8, {}, VarArg{"code", 0, 255});
    UOpPtr dec = fp8_decode_uop(s.t, code);
    ASSERT_EQ(dec->dtype(), dtypes::kFloat32);
    for (int c = 0; c < 256; c++) {
      NodeValues in{{code.get(), static_cast<double>(c)}};
      EXPECT_TRUE(same(eval_float(dec, {}, &in), fp8_decode(s.t, static_cast<uint8_t>(c))))
          << s.t.name() << " " << c;
    }
    UOpPtr x = UOp::make(Op::DEFINE_VAR, dtypes::kFloat32, {}, VarArg{"x", 0, 0});
    UOpPtr enc = fp8_encode_uop(s.t, x);
    ASSERT_EQ(enc->dtype(), dtypes::kUint8);
    for (float f : sweep()) {
      NodeValues in{{x.get(), f}};
      ASSERT_EQ(eval_int(enc, {}, &in), fp8_encode(s.t, f)) << s.t.name() << " " << f;
    }
    UOpPtr y = UOp::make(Op::DEFINE_VAR, dtypes::kFloat64, {}, VarArg{"y", 0, 0});
    UOpPtr enc64 = fp8_encode_uop(s.t, y);
    for (double d : {1.0625 + 1e-12, 1.125 + 1e-12, -(1.0625 + 1e-12), 464.0 + 1e-9, 1e300,
                     std::ldexp(1.0, -1070), -std::ldexp(1.0, -1070), -0.0}) {
      NodeValues in{{y.get(), d}};
      EXPECT_EQ(eval_int(enc64, {}, &in), fp8_encode(s.t, d)) << s.t.name() << " " << d;
    }
  }
}

}  // namespace
}  // namespace baregrad::compiler
