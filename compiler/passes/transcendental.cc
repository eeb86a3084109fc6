#include "compiler/passes/transcendental.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>

#include "base/check.h"

namespace baregrad::compiler {
namespace {

constexpr long double kInvLn2 = 1.442695040888963407359924681001892137L;
constexpr long double kPiOver2 = 1.570796326794896619231321691639751442L;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// Minimax coefficients, lowest degree first (Remez fits, computed with mpmath).
// 2^r = 1 + c0*r + c1*r^2 + ... on |r| <= 0.5002; relative error 2^-29.0 / 2^-59.2.
constexpr double kExp2F32[] = {0.6931472057970309,  0.24022646881524745,   0.05550328646632596,
                               0.00961848953144135, 0.0013399984032782559, 0.00015345766050285688};
constexpr double kExp2F64[] = {
    0.6931471805599453,     0.2402265069591003,     0.055504108664822686,   0.009618129107648078,
    0.0013333558146168985,  0.00015403530359550517, 1.5252734059255654e-05, 1.3215513118317547e-06,
    1.0177969844260458e-07, 7.045481670659622e-09,  4.468525221463432e-10,  3.83483978348103e-11};
// log(1+f) = 2s + s*R(s^2), s = f/(2+f), |s| <= 0.1716; R(z) = z*(c0 + c1*z + ...).
constexpr double kLogF32[] = {0.6666677611326507, 0.399775702008265, 0.29871048978153136};
constexpr double kLogF64[] = {0.6666666666666734,  0.3999999999941608, 0.2857142874208605,
                              0.22222198602937424, 0.1818356284284482, 0.15314086904940402,
                              0.1479560156774125};
// log(1+f) = 2s + 2s^3/3 + s^5*T(s^2): the tail used by the extended-precision log of pow.
constexpr double kLogTailF32[] = {0.40000151955189506, 0.2854715327523137, 0.2341816217916732};
constexpr double kLogTailF64[] = {0.4000000000000225,  0.2857142857010249,  0.2222222251941816,
                                  0.18181784409939725, 0.15386755418121814, 0.1325686098248293,
                                  0.1319593898108905};
// 1/ln2 and 2/3 as double + double.
constexpr double kInvLn2Hi = 1.4426950408889634, kInvLn2Lo = 2.0355273740931033e-17;
constexpr double kTwoThirdsHi = 0.6666666666666666, kTwoThirdsLo = 3.700743415417188e-17;
// sin(r) = r + r^3*S(r^2), cos(r) = 1 - r^2/2 + r^4*C(r^2) on |r| <= pi/4.
constexpr double kSinF32[] = {-0.16666654609377154, 0.008332160750800498, -0.0001951528166231495};
constexpr double kCosF32[] = {0.04166664568273608, -0.0013887316242095172, 2.443315558649852e-05};
constexpr double kSinF64[] = {-0.1666666666666663,     0.008333333333322118,
                              -0.00019841269829589325, 2.7557313621308295e-06,
                              -2.5050747750318797e-08, 1.5896229407751233e-10};
constexpr double kCosF64[] = {0.04166666666665868,    -0.0013888888887599266,
                              2.4801586543980773e-05, -2.755711138080489e-07,
                              2.0849582682812396e-09, -1.0071535095018668e-11};
// pi/2 as 23-bit pieces (exact doubles) and a rounded tail, for float64 Cody-Waite reduction.
constexpr double kPio2Pieces[] = {1.570796251296997,     7.549789415861596e-08,
                                  5.390302529957765e-15, 3.2820031633724233e-22,
                                  3.795010649787914e-29, 1.2293331171481208e-36};
// 2/pi preceded by 26 zero bits, as overlapping 64-bit windows D[i] = word[i]:word[i+1] of the
// 32-bit words of that bit string.
constexpr uint64_t kTwoOverPi[] = {
    0x00000028be60db93ull, 0xbe60db9391054a7full, 0x91054a7f09d5f47dull, 0x09d5f47d4d377036ull,
    0x4d377036d8a5664full, 0xd8a5664f10e4107full, 0x10e4107f9458eaf7ull};

// The float dtype being expanded (with lanes) and facts about its format.
struct Fmt {
  DType f;     // float32 or float64, with lanes
  DType i;     // same-width signed int, same lanes
  int mant;    // explicit mantissa bits
  int bias;    // exponent bias
  int split;   // low mantissa bits hi_part() clears: products of two hi parts are exact
  int dekker;  // low mantissa bits cleared by two_prod's split
  bool f64;

  explicit Fmt(DType t) : f(t), f64(t.scalar == Scalar::kFloat64) {
    i = (f64 ? dtypes::kInt64 : dtypes::kInt32).vec(t.count);
    mant = f64 ? 52 : 23;
    bias = f64 ? 1023 : 127;
    split = f64 ? 32 : 12;
    dekker = f64 ? 27 : 12;
  }
  // v as a hi + lo pair of this dtype.
  std::pair<double, double> c2(double hi, double lo) const {
    double h = round_to(f.base(), hi);
    return {h, round_to(f.base(), (hi - h) + lo)};
  }
  UOpPtr c(double v) const { return UOp::cnst(f, round_to(f.base(), v)); }
  UOpPtr ci(int64_t v) const { return UOp::cnst_int(i, v); }
};

UOpPtr bitcast(const UOpPtr& a, DType t) { return UOp::make(Op::BITCAST, t, {a}); }
UOpPtr int_op(Op op, const UOpPtr& a, int64_t b) {
  return UOp::alu(op, {a, UOp::cnst_int(a->dtype(), b)});
}
UOpPtr band(const UOpPtr& a, int64_t m) { return int_op(Op::AND, a, m); }
UOpPtr bor(const UOpPtr& a, int64_t m) { return int_op(Op::OR, a, m); }
UOpPtr shl(const UOpPtr& a, int64_t n) { return int_op(Op::SHL, a, n); }
UOpPtr shr(const UOpPtr& a, int64_t n) { return int_op(Op::SHR, a, n); }
UOpPtr trunc_op(const UOpPtr& a) { return UOp::alu(Op::TRUNC, {a}); }
UOpPtr minimum(const UOpPtr& a, const UOpPtr& b) { return -maximum(-a, -b); }
UOpPtr is_nan(const UOpPtr& a) { return ne(a, a); }
// |x| by clearing the sign bit (-0 and -nan included).
UOpPtr abs_f(const Fmt& F, const UOpPtr& x) {
  return bitcast(band(bitcast(x, F.i), std::numeric_limits<int64_t>::max() >> (F.f64 ? 0 : 32)),
                 F.f);
}

// c[0] + x*(c[1] + x*(c[2] + ...)), with c the float32 or float64 table, rounded to x's dtype.
UOpPtr poly(const Fmt& F,
            const UOpPtr& x,
            std::span<const double> c32,
            std::span<const double> c64) {
  std::span<const double> c = F.f64 ? c64 : c32;
  UOpPtr acc = F.c(c.back());
  for (size_t k = c.size() - 1; k-- > 0;) acc = acc * x + F.c(c[k]);
  return acc;
}

// v truncated to its leading `bits` significant bits.
double truncate_bits(double v, int bits) {
  int e = std::ilogb(v);
  return std::ldexp(std::trunc(std::ldexp(v, bits - 1 - e)), e + 1 - bits);
}

// Round to nearest integer (ties away from zero) for |x| < 2^mant.
UOpPtr round_int(const Fmt& F, const UOpPtr& x) {
  return trunc_op(x + where(lt(x, F.c(0)), F.c(-0.5), F.c(0.5)));
}

// a with its low `bits` mantissa bits cleared (default: few enough that hi*hi is exact).
UOpPtr hi_part(const Fmt& F, const UOpPtr& a, int bits = 0) {
  return bitcast(band(bitcast(a, F.i), ~((int64_t{1} << (bits ? bits : F.split)) - 1)), F.f);
}

// Unevaluated sums hi + lo (double-float arithmetic).
struct Pair {
  UOpPtr h, l;
};
// a + b exactly, given |a| >= |b| or a == 0.
Pair fast_two_sum(const UOpPtr& a, const UOpPtr& b) {
  UOpPtr s = a + b;
  return {s, b - (s - a)};
}
// a * b exactly (Dekker's product on split halves).
Pair two_prod(const Fmt& F, const UOpPtr& a, const UOpPtr& b) {
  UOpPtr p = a * b;
  UOpPtr ah = hi_part(F, a, F.dekker), bh = hi_part(F, b, F.dekker);
  UOpPtr al = a - ah, bl = b - bh;
  return {p, (((ah * bh - p) + ah * bl) + al * bh) + al * bl};
}

// 2^k for integer k in the normal exponent range.
UOpPtr pow2_int(const Fmt& F, const UOpPtr& k) { return bitcast(shl(k + F.bias, F.mant), F.f); }

// p * 2^k with one rounding (p in [0.5, 2], k within twice the exponent range).
UOpPtr scale_pow2(const Fmt& F, const UOpPtr& p, const UOpPtr& k) {
  UOpPtr k1 = shr(k, 1);
  return p * pow2_int(F, k1) * pow2_int(F, k - k1);
}

// 2^(x + xl) for non-nan x and |xl| <= ulp(x) (xl optional).
UOpPtr exp2_core(const Fmt& F, const UOpPtr& x, const UOpPtr& xl = nullptr) {
  double lo = F.f64 ? -1080 : -152, hi = F.f64 ? 1025 : 129;
  UOpPtr xc = minimum(maximum(x, F.c(lo)), F.c(hi));
  UOpPtr k = round_int(F, xc);
  UOpPtr r = xc - k;
  if (xl) r = r + xl;
  // 2^r = 1 + r*l1 + (r*l2 + r^2*Q(r)) with ln2 = l1 + l2; hi_part(r)*l1 is exact, and the sum
  // 1 + that is carried exactly so that only the final addition rounds at full size.
  double c1 = F.f64 ? kExp2F64[0] : kExp2F32[0];
  double l1 = truncate_bits(c1, F.split), l2 = c1 - l1;
  UOpPtr q = poly(F, r, std::span(kExp2F32).subspan(1), std::span(kExp2F64).subspan(1));
  UOpPtr rh = hi_part(F, r);
  UOpPtr a = rh * F.c(l1);
  UOpPtr s = F.c(1) + a;
  UOpPtr tail = ((F.c(1) - s) + a) + ((r - rh) * F.c(l1) + (r * F.c(l2) + r * r * q));
  return scale_pow2(F, s + tail, cast(k, F.i));
}

UOpPtr exp2_f(const Fmt& F, const UOpPtr& x) {
  UOpPtr nan = is_nan(x);
  return where(nan, x, exp2_core(F, where(nan, F.c(0), x)));
}

// x = 2^e * (1 + f) with f in (sqrt(2)/2 - 1, sqrt(2) - 1] exact, for finite x > 0.
void log_arg(const Fmt& F, const UOpPtr& x, UOpPtr* e, UOpPtr* f) {
  int up = F.f64 ? 54 : 24;
  UOpPtr tiny = lt(x, F.c(std::ldexp(1.0, 1 - F.bias)));
  UOpPtr bits = bitcast(where(tiny, x * F.c(std::ldexp(1.0, up)), x), F.i);
  int64_t one = int64_t{F.bias} << F.mant;
  UOpPtr mbits = bor(band(bits, (int64_t{1} << F.mant) - 1), one);
  int64_t sqrt2 = F.f64 ? 0x3ff6a09e667f3bcdll : 0x3fb504f3ll;
  UOpPtr big = lt(F.ci(sqrt2), mbits);
  mbits = where(big, mbits - (int64_t{1} << F.mant), mbits);
  *e = cast(
      shr(bits, F.mant) - F.bias + where(big, F.ci(1), F.ci(0)) + where(tiny, F.ci(-up), F.ci(0)),
      F.f);
  *f = bitcast(mbits, F.f) - F.c(1);
}

// log2(x) for finite x > 0 (denormals included); garbage elsewhere.
UOpPtr log2_core(const Fmt& F, const UOpPtr& x) {
  UOpPtr y, f;
  log_arg(F, x, &y, &f);
  // log(1+f) = f - hfsq + s*(hfsq + R(s^2)), carried as hi + lo with hi exact in few bits.
  UOpPtr s = f / (F.c(2) + f);
  UOpPtr z = s * s;
  UOpPtr r = z * poly(F, z, kLogF32, kLogF64);
  UOpPtr hfsq = F.c(0.5) * f * f;
  UOpPtr hi = hi_part(F, f - hfsq);
  UOpPtr lo = ((f - hi) - hfsq) + s * (hfsq + r);
  // Times 1/ln2 = ivh + ivl, ivh short enough that hi*ivh is exact.
  double ivh = truncate_bits(static_cast<double>(kInvLn2), F.split);
  double ivl = static_cast<double>(kInvLn2 - ivh);
  UOpPtr vhi = hi * F.c(ivh);
  UOpPtr vlo = (lo + hi) * F.c(ivl) + lo * F.c(ivh);
  UOpPtr w = y + vhi;
  vlo = vlo + ((y - w) + vhi);
  return vlo + w;
}

// log2(x) as hi + lo, relative error ~2^-(2p-12) for p-bit floats; finite x > 0 only.
Pair log2_pair(const Fmt& F, const UOpPtr& x) {
  UOpPtr e, f;
  log_arg(F, x, &e, &f);
  // s = f/(2+f) as sh + sl; log(1+f) = 2s + 2s^3/3 + s^5*T(s^2) with the first two terms exact.
  UOpPtr u = F.c(2) + f;
  UOpPtr ul = f - (u - F.c(2));
  UOpPtr sh = f / u;
  Pair p = two_prod(F, sh, u);
  UOpPtr sl = (((f - p.h) - p.l) - sh * ul) / u;
  Pair z = two_prod(F, sh, sh);
  z.l = z.l + F.c(2) * sh * sl;
  Pair t = two_prod(F, sh, z.h);
  t.l = t.l + (sh * z.l + z.h * sl);
  auto [c3h, c3l] = F.c2(kTwoThirdsHi, kTwoThirdsLo);
  Pair u3 = two_prod(F, F.c(c3h), t.h);
  u3.l = u3.l + (F.c(c3h) * t.l + F.c(c3l) * t.h);
  UOpPtr tail = t.h * z.h * poly(F, z.h, kLogTailF32, kLogTailF64);
  Pair a = fast_two_sum(F.c(2) * sh, u3.h);
  a = fast_two_sum(a.h, a.l + (F.c(2) * sl + u3.l + tail));
  auto [ivh, ivl] = F.c2(kInvLn2Hi, kInvLn2Lo);
  Pair g = two_prod(F, a.h, F.c(ivh));
  g.l = g.l + (a.h * F.c(ivl) + a.l * F.c(ivh));
  Pair r = fast_two_sum(e, g.h);
  r.l = r.l + g.l;
  return r;
}

UOpPtr log2_f(const Fmt& F, const UOpPtr& x) {
  UOpPtr r = where(ne(x, F.c(0)), log2_core(F, x), F.c(-kInf));
  r = where(lt(x, F.c(0)), F.c(kNan), r);
  return where(lt(x, F.c(kInf)), r, x);
}

// sin and cos of rh + rl, |rh| <= pi/4, |rl| <= ulp(rh); out[0] = sin, out[1] = cos.
void sincos_kernel(const Fmt& F, const UOpPtr& rh, const UOpPtr& rl, UOpPtr out[2]) {
  UOpPtr z = rh * rh;
  UOpPtr hz = F.c(0.5) * z;
  UOpPtr w = F.c(1) - hz;
  UOpPtr sp = poly(F, z, kSinF32, kSinF64);
  UOpPtr cp = poly(F, z, kCosF32, kCosF64);
  out[0] = rh + (rh * z * sp + rl * w);
  out[1] = w + (((F.c(1) - w) - hz) + (z * z * cp - rh * rl));
}

// |x| * 2/pi mod 4 for float32 |x| >= pi/4, exactly, by an integer Payne-Hanek product. Returns
// the quadrant n (uint64 in 0..3) and the rest as a signed fraction f (int64, units of 2^-62).
void payne_hanek_f32(const UOpPtr& ax, UOpPtr* n, UOpPtr* frac) {
  DType u64 = dtypes::kUint64.vec(ax->dtype().count);
  UOpPtr bits = cast(bitcast(ax, dtypes::kInt32.vec(ax->dtype().count)), u64);
  UOpPtr e = shr(bits, 23);
  UOpPtr m = bor(band(bits, 0x7fffff), 0x800000);
  // |x| = m * 2^(e-150); 2/pi bits before offset o = e-126 of the padded string only add
  // multiples of 4, so a 96-bit window from o suffices.
  UOpPtr o = maximum(e, UOp::cnst_int(u64, 126)) - 126;
  UOpPtr q = shr(o, 5), sh = UOp::cnst_int(u64, 32) - band(o, 31);
  UOpPtr limb[3];
  for (int k = 0; k < 3; k++) {
    UOpPtr d = UOp::cnst_int(u64, static_cast<int64_t>(kTwoOverPi[k + 4]));
    for (int j = 3; j >= 0; j--)
      d = where(lt(q, j + 1), UOp::cnst_int(u64, static_cast<int64_t>(kTwoOverPi[k + j])), d);
    limb[k] = band(UOp::alu(Op::SHR, {d, sh}), 0xffffffff);
  }
  // m * window = p0*2^64 + p1*2^32 + p2; bits [32, 96) of it are |x|*2/pi mod 4 in Q2.62.
  UOpPtr v = shl(m * limb[0], 32) + m * limb[1] + shr(m * limb[2], 32);
  UOpPtr vr = v + (int64_t{1} << 61);
  *n = shr(vr, 62);
  *frac = cast(band(vr, (int64_t{1} << 62) - 1), dtypes::kInt64.vec(ax->dtype().count)) -
          (int64_t{1} << 61);
}

// Reduced argument rh + rl = |x| - n*pi/2 and quadrant n (same dtype as x) for float32 x.
void reduce_f32(const Fmt& F, const UOpPtr& ax, UOpPtr* rh, UOpPtr* rl, UOpPtr* nq) {
  UOpPtr n, fr;
  payne_hanek_f32(ax, &n, &fr);
  UOpPtr fh = cast(fr, F.f);
  UOpPtr fl = cast(fr - cast(fh, fr->dtype()), F.f);
  // (fh + fl) * pi/2 * 2^-62 with pi/2 = k1 + k2, k1 of 12 bits so that hi_part(fh)*k1 is exact.
  double k1 = std::ldexp(truncate_bits(static_cast<double>(kPiOver2), 12), -62);
  double k2 = std::ldexp(static_cast<double>(kPiOver2 - std::ldexp(k1, 62)), -62);
  UOpPtr a1 = hi_part(F, fh);
  UOpPtr p = a1 * F.c(k1);
  UOpPtr t = (fh - a1) * F.c(k1) + (fh * F.c(k2) + fl * F.c(k1));
  *rh = p + t;
  *rl = (p - *rh) + t;
  *nq = cast(n, F.i);
}

// Reduced argument for float64 by Cody-Waite with a 5-piece pi/2, exact for |x| < 2^30*pi/2.
void reduce_f64(const Fmt& F, const UOpPtr& ax, UOpPtr* rh, UOpPtr* rl, UOpPtr* nq) {
  UOpPtr n = trunc_op(ax * F.c(static_cast<double>(1 / kPiOver2)) + F.c(0.5));
  UOpPtr hi = ax - n * F.c(kPio2Pieces[0]);
  UOpPtr lo = F.c(0);
  for (int k = 1; k < 5; k++) {
    UOpPtr b = -(n * F.c(kPio2Pieces[k]));
    UOpPtr s = hi + b;
    UOpPtr bb = s - hi;
    lo = lo + ((hi - (s - bb)) + (b - bb));
    hi = s;
  }
  lo = lo - n * F.c(kPio2Pieces[5]);
  // Past 2^30*pi/2 the pieces' products round; clamping keeps the result finite and in [-1, 1].
  UOpPtr h = hi + lo;
  *rh = minimum(maximum(h, F.c(-1)), F.c(1));
  *rl = where(ne(*rh, h), F.c(0), (hi - h) + lo);
  UOpPtr n4 = n - trunc_op(n * F.c(0.25)) * F.c(4);
  *nq = cast(n4, F.i);
}

UOpPtr sin_f(const Fmt& F, const UOpPtr& x) {
  UOpPtr ax = abs_f(F, x);
  UOpPtr safe = where(lt(ax, F.c(kInf)), ax, F.c(0));
  UOpPtr rh, rl, n;
  if (F.f64)
    reduce_f64(F, safe, &rh, &rl, &n);
  else
    reduce_f32(F, safe, &rh, &rl, &n);
  UOpPtr neg = lt(x, F.c(0));
  n = where(neg, band(F.ci(0) - n, 3), n);
  UOpPtr small = lt(ax, F.c(0.785398));
  rh = where(small, x, where(neg, -rh, rh));
  rl = where(small, F.c(0), where(neg, -rl, rl));
  n = where(small, F.ci(0), n);
  UOpPtr sc[2];
  sincos_kernel(F, rh, rl, sc);
  UOpPtr res = where(ne(band(n, 1), F.ci(0)), sc[1], sc[0]);
  res = where(ne(band(n, 2), F.ci(0)), -res, res);
  res = where(lt(ax, F.c(std::ldexp(1.0, F.f64 ? -27 : -12))), x, res);
  return where(lt(ax, F.c(kInf)), res, F.c(kNan));
}

// pow(x, y) = 2^(y*log2|x|) with the product carried in double-float, and C's sign and
// special-case rules.
UOpPtr pow_f(const Fmt& F, const UOpPtr& x, const UOpPtr& y) {
  UOpPtr ax = abs_f(F, x);
  UOpPtr fin = logical_and(lt(F.c(0), ax), lt(ax, F.c(kInf)));
  Pair l = log2_pair(F, where(fin, ax, F.c(1)));
  l.h = where(fin, l.h, where(ne(ax, F.c(0)), ax, F.c(-kInf)));
  Pair w = two_prod(F, y, l.h);
  w.l = w.l + y * l.l;
  // |x| = 1 gives 2^0 for every y, including +-inf (pow(-1, inf) = 1).
  UOpPtr unit = ne(ax, F.c(1));
  w.h = where(unit, w.h, F.c(0));
  double lim = F.f64 ? 2048 : 256;
  UOpPtr in_range =
      logical_and(logical_and(unit, fin), logical_and(lt(w.h, F.c(lim)), lt(F.c(-lim), w.h)));
  UOpPtr nan = is_nan(w.h);
  UOpPtr mag = where(nan, w.h, exp2_core(F, where(nan, F.c(0), w.h), where(in_range, w.l, F.c(0))));
  UOpPtr y_frac = ne(trunc_op(y), y);
  UOpPtr yh = y * F.c(0.5);
  UOpPtr y_odd = where(y_frac, UOp::cnst(y_frac->dtype(), 0), ne(trunc_op(yh), yh));
  UOpPtr neg = lt(bitcast(x, F.i), F.ci(0));
  UOpPtr res = where(logical_and(neg, y_odd), -mag, mag);
  UOpPtr neg_finite = logical_and(lt(x, F.c(0)), lt(F.c(-kInf), x));
  res = where(logical_and(neg_finite, y_frac), F.c(kNan), res);
  res = where(ne(y, F.c(0)), res, F.c(1));
  return where(ne(x, F.c(1)), res, F.c(1));
}

// Applies `fn` in float32 for half types, directly for float32/float64.
template <class Fn>
UOpPtr in_wide(const UOpPtr& x, Fn fn) {
  DType t = x->dtype();
  if (t.scalar == Scalar::kFloat32 || t.scalar == Scalar::kFloat64) return fn(Fmt(t), x);
  CHECK(t.scalar == Scalar::kFloat16 || t.scalar == Scalar::kBFloat16)
      << "transcendental of " << t.name();
  return cast(fn(Fmt(dtypes::kFloat32.vec(t.count)), cast(x, dtypes::kFloat32.vec(t.count))), t);
}

}  // namespace

UOpPtr expand_exp2(const UOpPtr& x) { return in_wide(x, exp2_f); }
UOpPtr expand_log2(const UOpPtr& x) { return in_wide(x, log2_f); }
UOpPtr expand_sin(const UOpPtr& x) { return in_wide(x, sin_f); }
UOpPtr expand_pow(const UOpPtr& x, const UOpPtr& y) {
  return in_wide(x, [&](const Fmt& F, const UOpPtr& xw) { return pow_f(F, xw, cast(y, F.f)); });
}

const PatternMatcher& pm_transcendental() {
  auto is_float = [](const UOp* n) { return !n->dtype().ptr && dtypes::is_float(n->dtype()); };
  static const PatternMatcher pm(
      {
          {UPat::op(Op::EXP2, std::vector<UPat>{UPat::var("x")}).where(is_float),
           [](const Match& m) { return expand_exp2(m["x"]); }},
          {UPat::op(Op::LOG2, std::vector<UPat>{UPat::var("x")}).where(is_float),
           [](const Match& m) { return expand_log2(m["x"]); }},
          {UPat::op(Op::SIN, std::vector<UPat>{UPat::var("x")}).where(is_float),
           [](const Match& m) { return expand_sin(m["x"]); }},
          {UPat::op(Op::POW, std::vector<UPat>{UPat::var("x"), UPat::var("y")}).where(is_float),
           [](const Match& m) { return expand_pow(m["x"], m["y"]); }},
      },
      "transcendental");
  return pm;
}

UOpPtr rewrite_transcendentals(const UOpPtr& sink) {
  return graph_rewrite(sink, pm_transcendental());
}

}  // namespace baregrad::compiler
