// Value bounds, reference ALU semantics and the arithmetic sugar of uop.h.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/check.h"
#include "compiler/fp8.h"
#include "compiler/uop.h"

namespace baregrad::compiler {

int64_t wrap_int(DType dtype, int64_t v) {
  switch (dtype.scalar) {
    case Scalar::kBool:
      return v != 0;
    case Scalar::kInt8:
      return static_cast<int8_t>(v);
    case Scalar::kUint8:
      return static_cast<uint8_t>(v);
    case Scalar::kInt16:
      return static_cast<int16_t>(v);
    case Scalar::kUint16:
      return static_cast<uint16_t>(v);
    case Scalar::kInt32:
      return static_cast<int32_t>(v);
    case Scalar::kUint32:
      return static_cast<uint32_t>(v);
    default:
      return v;
  }
}

namespace {
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

std::pair<int64_t, int64_t> dtype_bounds(DType t) {
  if (dtypes::is_bool(t)) return {0, 1};
  if (!dtypes::is_int(t) || t.scalar == Scalar::kInt64 || t.scalar == Scalar::kUint64)
    return {t.scalar == Scalar::kUint64 ? 0 : kMin, kMax};
  return {static_cast<int64_t>(dtypes::min_value(t)), static_cast<int64_t>(dtypes::max_value(t))};
}

// min/max over the products / sums of the corners, or nullopt on int64 overflow.
bool corners(Op op, int64_t a0, int64_t a1, int64_t b0, int64_t b1, int64_t* lo, int64_t* hi) {
  int64_t v[4];
  const int64_t as[2] = {a0, a1}, bs[2] = {b0, b1};
  for (int i = 0; i < 4; i++) {
    int64_t x = as[i / 2], y = bs[i % 2];
    bool of = op == Op::ADD   ? __builtin_add_overflow(x, y, &v[i])
              : op == Op::SUB ? __builtin_sub_overflow(x, y, &v[i])
                              : __builtin_mul_overflow(x, y, &v[i]);
    if (of) return false;
  }
  *lo = *std::min_element(v, v + 4);
  *hi = *std::max_element(v, v + 4);
  return true;
}
}  // namespace

int64_t UOp::vmin() const {
  std::call_once(bounds_once_, [this] { compute_bounds(); });
  return vmin_;
}
int64_t UOp::vmax() const {
  std::call_once(bounds_once_, [this] { compute_bounds(); });
  return vmax_;
}

void UOp::compute_bounds() const {
  auto [dlo, dhi] = dtype_bounds(dtype_.base());
  int64_t lo = dlo, hi = dhi;
  // A result outside the dtype's range means the op can wrap: the bounds are then unknown.
  auto set = [&](int64_t l, int64_t h) {
    if (l < dlo || h > dhi) return;
    lo = l;
    hi = h;
  };
  bool ints = dtypes::is_int(dtype_) || dtypes::is_bool(dtype_);
  if (!ints && !is_comparison(op_)) {
    vmin_ = dlo;
    vmax_ = dhi;
    return;
  }
  const UOp* a = src_.size() > 0 ? src_[0].get() : nullptr;
  const UOp* b = src_.size() > 1 ? src_[1].get() : nullptr;
  switch (op_) {
    case Op::CONST:
      set(const_int(), const_int());
      break;
    case Op::DEFINE_VAR:
    case Op::SPECIAL:
      set(arg_as<VarArg>().min, arg_as<VarArg>().max);
      break;
    case Op::RANGE:
      set(a->vmin(), b->vmax() - 1);
      break;
    case Op::ADD:
    case Op::SUB:
    case Op::MUL: {
      int64_t l, h;
      if (corners(op_, a->vmin(), a->vmax(), b->vmin(), b->vmax(), &l, &h)) set(l, h);
      break;
    }
    case Op::NEG:
      if (a->vmin() != kMin) set(-a->vmax(), -a->vmin());
      break;
    case Op::IDIV:
      if (b->vmin() == b->vmax() && b->vmin() > 0)
        set(a->vmin() / b->vmin(), a->vmax() / b->vmin());
      else if (b->vmin() == b->vmax() && b->vmin() < 0 && a->vmin() != kMin)
        set(a->vmax() / b->vmin(), a->vmin() / b->vmin());
      else if (b->vmin() > 0 && a->vmin() >= 0)
        set(a->vmin() / b->vmax(), a->vmax() / b->vmin());
      break;
    case Op::MOD:
      if (b->vmin() > 0) {
        int64_t m = b->vmax() - 1;
        if (a->vmin() >= 0)
          set(a->vmax() < b->vmin() ? a->vmin() : 0, std::min(a->vmax(), m));
        else if (a->vmax() <= 0)
          set(std::max(a->vmin(), -m), 0);
        else
          set(std::max(a->vmin(), -m), std::min(a->vmax(), m));
      }
      break;
    case Op::MAX:
      set(std::max(a->vmin(), b->vmin()), std::max(a->vmax(), b->vmax()));
      break;
    case Op::CMPLT:
      if (a->vmax() < b->vmin())
        set(1, 1);
      else if (a->vmin() >= b->vmax())
        set(0, 0);
      else
        set(0, 1);
      break;
    case Op::CMPNE:
    case Op::CMPEQ: {
      bool disjoint = a->vmax() < b->vmin() || b->vmax() < a->vmin();
      bool same_point = a->vmin() == a->vmax() && b->vmin() == b->vmax() && a->vmin() == b->vmin();
      int64_t ne = disjoint ? 1 : same_point ? 0 : -1;
      if (ne < 0)
        set(0, 1);
      else
        set(op_ == Op::CMPNE ? ne : 1 - ne, op_ == Op::CMPNE ? ne : 1 - ne);
      break;
    }
    case Op::WHERE: {
      const UOp* c = src_[2].get();
      if (a->vmin() == a->vmax())
        set(a->vmin() ? b->vmin() : c->vmin(), a->vmin() ? b->vmax() : c->vmax());
      else
        set(std::min(b->vmin(), c->vmin()), std::max(b->vmax(), c->vmax()));
      break;
    }
    case Op::AND:
      if (dtypes::is_bool(dtype_))
        set(a->vmin() & b->vmin(), a->vmax() & b->vmax());
      else if (a->vmin() >= 0 && b->vmin() >= 0)
        set(0, std::min(a->vmax(), b->vmax()));
      break;
    case Op::OR:
      if (dtypes::is_bool(dtype_)) set(a->vmin() | b->vmin(), a->vmax() | b->vmax());
      break;
    case Op::SHR:
      if (a->vmin() >= 0 && b->vmin() == b->vmax() && b->vmin() >= 0 && b->vmin() < 63)
        set(a->vmin() >> b->vmin(), a->vmax() >> b->vmin());
      break;
    case Op::CAST:
      if (dtypes::is_int(a->dtype()) || dtypes::is_bool(a->dtype())) {
        if (a->vmin() >= dlo && a->vmax() <= dhi) set(a->vmin(), a->vmax());
      }
      break;
    default:
      break;
  }
  vmin_ = lo;
  vmax_ = hi;
}

// ---------------------------------------------------------------------------------------------
// Reference ALU semantics

namespace {
float round_half(float f, bool bf16) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if (bf16) {
    if (std::isnan(f)) return f;
    u += 0x7fff + ((u >> 16) & 1);  // round to nearest even
    return std::bit_cast<float>(u & 0xffff0000u);
  }
  return static_cast<float>(static_cast<_Float16>(f));
}
}  // namespace

// `v` rounded to float32 to odd (truncated, the last bit set when inexact): a later rounding to
// bfloat16 (7 fewer fraction bits) is then the one rounding of `v` to nearest even.
float round_to_odd(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(v) || static_cast<double>(f) == v) return f;
  if (std::abs(static_cast<double>(f)) > std::abs(v)) f = std::nextafter(f, 0.0f);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
}

double round_to(DType t, double v) {
  switch (t.scalar) {
    case Scalar::kFloat32:
      return static_cast<float>(v);
    case Scalar::kFloat16:
      return static_cast<float>(static_cast<_Float16>(v));  // one rounding (__truncdfhf2)
    case Scalar::kBFloat16:
      return round_half(round_to_odd(v), true);
    case Scalar::kFp8e4m3:
    case Scalar::kFp8e5m2:
    case Scalar::kFp8e4m3fnuz:
    case Scalar::kFp8e5m2fnuz:
      return fp8_round(t, v);  // one rounding of the exact value
    default:
      return v;
  }
}

double exec_alu_float(Op op, DType dtype, std::span<const double> x) {
  double r = 0;
  switch (op) {
    case Op::NEG:
      r = -x[0];
      break;
    case Op::EXP2:
      r = std::exp2(x[0]);
      break;
    case Op::LOG2:
      r = std::log2(x[0]);
      break;
    case Op::SIN:
      r = std::sin(x[0]);
      break;
    case Op::SQRT:
      r = std::sqrt(x[0]);
      break;
    case Op::RECIP:
      r = 1.0 / x[0];
      break;
    case Op::TRUNC:
      r = std::trunc(x[0]);
      break;
    case Op::ADD:
      r = x[0] + x[1];
      break;
    case Op::SUB:
      r = x[0] - x[1];
      break;
    case Op::MUL:
      r = x[0] * x[1];
      break;
    case Op::FDIV:
      r = x[0] / x[1];
      break;
    case Op::MAX:
      r = std::isnan(x[0]) || std::isnan(x[1]) ? NAN : std::max(x[0], x[1]);
      break;
    case Op::POW:
      r = std::pow(x[0], x[1]);
      break;
    case Op::CMPLT:
      return x[0] < x[1];
    case Op::CMPNE:
      return x[0] != x[1];
    case Op::CMPEQ:
      return x[0] == x[1];
    case Op::WHERE:
      r = x[0] != 0 ? x[1] : x[2];
      break;
    case Op::MULACC:
      r = x[0] * x[1] + x[2];
      break;
    default:
      UNREACHABLE() << "exec_alu_float: " << op_name(op);
  }
  return round_to(dtype, r);
}

int64_t exec_alu_int(Op op, DType dtype, std::span<const int64_t> x) {
  bool u = dtypes::is_unsigned(dtype);
  auto uv = [](int64_t v) { return static_cast<uint64_t>(v); };
  int64_t r = 0;
  switch (op) {
    case Op::NEG:
      r = static_cast<int64_t>(0 - uv(x[0]));
      break;
    case Op::ADD:
      r = static_cast<int64_t>(uv(x[0]) + uv(x[1]));
      break;
    case Op::SUB:
      r = static_cast<int64_t>(uv(x[0]) - uv(x[1]));
      break;
    case Op::MUL:
      r = static_cast<int64_t>(uv(x[0]) * uv(x[1]));
      break;
    case Op::IDIV:
      if (x[1] == 0) return 0;
      if (!u && x[0] == std::numeric_limits<int64_t>::min() && x[1] == -1)
        r = x[0];
      else
        r = u ? static_cast<int64_t>(uv(x[0]) / uv(x[1])) : x[0] / x[1];
      break;
    case Op::MOD:
      if (x[1] == 0) return 0;
      if (!u && x[1] == -1)
        r = 0;
      else
        r = u ? static_cast<int64_t>(uv(x[0]) % uv(x[1])) : x[0] % x[1];
      break;
    case Op::MAX:
      r = u ? static_cast<int64_t>(std::max(uv(x[0]), uv(x[1]))) : std::max(x[0], x[1]);
      break;
    case Op::CMPLT:
      return u ? uv(x[0]) < uv(x[1]) : x[0] < x[1];
    case Op::CMPNE:
      return x[0] != x[1];
    case Op::CMPEQ:
      return x[0] == x[1];
    case Op::AND:
      r = x[0] & x[1];
      break;
    case Op::OR:
      r = x[0] | x[1];
      break;
    case Op::XOR:
      r = x[0] ^ x[1];
      break;
    case Op::SHL:
      r = static_cast<int64_t>(uv(x[0]) << (uv(x[1]) & 63));
      break;
    case Op::SHR:
      r = u ? static_cast<int64_t>(uv(x[0]) >> (uv(x[1]) & 63)) : x[0] >> (x[1] & 63);
      break;
    case Op::WHERE:
      r = x[0] ? x[1] : x[2];
      break;
    case Op::MULACC:
      r = static_cast<int64_t>(uv(x[0]) * uv(x[1]) + uv(x[2]));
      break;
    default:
      UNREACHABLE() << "exec_alu_int: " << op_name(op);
  }
  return wrap_int(dtype, r);
}

// ---------------------------------------------------------------------------------------------
// Sugar

UOpPtr const_like(const UOpPtr& a, double v) { return UOp::cnst(a->dtype(), v); }
namespace {
UOpPtr ic(const UOpPtr& a, int64_t v) { return UOp::cnst_int(a->dtype(), v); }
}  // namespace

UOpPtr operator+(const UOpPtr& a, const UOpPtr& b) { return UOp::alu(Op::ADD, {a, b}); }
UOpPtr operator-(const UOpPtr& a, const UOpPtr& b) { return UOp::alu(Op::SUB, {a, b}); }
UOpPtr operator*(const UOpPtr& a, const UOpPtr& b) { return UOp::alu(Op::MUL, {a, b}); }
UOpPtr operator/(const UOpPtr& a, const UOpPtr& b) {
  return UOp::alu(dtypes::is_float(a->dtype()) ? Op::FDIV : Op::IDIV, {a, b});
}
UOpPtr operator%(const UOpPtr& a, const UOpPtr& b) { return UOp::alu(Op::MOD, {a, b}); }
UOpPtr operator-(const UOpPtr& a) { return UOp::alu(Op::NEG, {a}); }
UOpPtr operator+(const UOpPtr& a, int64_t b) { return a + ic(a, b); }
UOpPtr operator-(const UOpPtr& a, int64_t b) { return a - ic(a, b); }
UOpPtr operator*(const UOpPtr& a, int64_t b) { return a * ic(a, b); }
UOpPtr operator/(const UOpPtr& a, int64_t b) { return a / ic(a, b); }
UOpPtr operator%(const UOpPtr& a, int64_t b) { return a % ic(a, b); }
UOpPtr lt(const UOpPtr& a, const UOpPtr& b) { return UOp::alu(Op::CMPLT, {a, b}); }
UOpPtr lt(const UOpPtr& a, int64_t b) { return lt(a, ic(a, b)); }
UOpPtr ne(const UOpPtr& a, const UOpPtr& b) { return UOp::alu(Op::CMPNE, {a, b}); }
UOpPtr maximum(const UOpPtr& a, const UOpPtr& b) { return UOp::alu(Op::MAX, {a, b}); }
UOpPtr where(const UOpPtr& c, const UOpPtr& a, const UOpPtr& b) {
  return UOp::alu(Op::WHERE, {c, a, b});
}
UOpPtr logical_and(const UOpPtr& a, const UOpPtr& b) { return UOp::alu(Op::AND, {a, b}); }
UOpPtr cast(const UOpPtr& a, DType to) {
  if (a->dtype() == to) return a;
  return UOp::make(Op::CAST, to, {a});
}

}  // namespace baregrad::compiler
