#include "compiler/passes/lower_fp8.h"

#include <unordered_map>

#include "base/check.h"
#include "compiler/fp8.h"

namespace baregrad::compiler {
namespace {

UOpPtr k(DType t, int64_t v) { return UOp::cnst_int(t, v); }
UOpPtr bin(Op op, const UOpPtr& a, const UOpPtr& b) { return UOp::make(op, a->dtype(), {a, b}); }
UOpPtr bin(Op op, const UOpPtr& a, int64_t b) { return bin(op, a, k(a->dtype(), b)); }
UOpPtr less(const UOpPtr& a, const UOpPtr& b) {
  return UOp::make(Op::CMPLT, dtypes::kBool, {a, b});
}
UOpPtr less(int64_t a, const UOpPtr& b) { return less(k(b->dtype(), a), b); }
UOpPtr sel(const UOpPtr& c, const UOpPtr& a, const UOpPtr& b) {
  return UOp::make(Op::WHERE, a->dtype(), {c, a, b});
}
UOpPtr sel(const UOpPtr& c, int64_t a, const UOpPtr& b) { return sel(c, k(b->dtype(), a), b); }
UOpPtr to(const UOpPtr& x, DType t) { return x->dtype() == t ? x : UOp::make(Op::CAST, t, {x}); }
UOpPtr bits(const UOpPtr& x, DType t) { return UOp::make(Op::BITCAST, t, {x}); }

// v >> s rounded to nearest even (1 <= s < bits of v, v + 2^s fits).
UOpPtr rne_shr(const UOpPtr& v, const UOpPtr& s) {
  UOpPtr half_m1 = bin(Op::SUB, bin(Op::SHL, k(v->dtype(), 1), bin(Op::SUB, s, 1)), 1);
  UOpPtr lsb = bin(Op::AND, bin(Op::SHR, v, s), 1);
  return bin(Op::SHR, bin(Op::ADD, bin(Op::ADD, v, half_m1), lsb), s);
}

}  // namespace

UOpPtr fp8_encode_uop(DType fp8, const UOpPtr& x) {
  const Fp8Format f = fp8_format(fp8);
  const bool dbl = x->dtype().scalar == Scalar::kFloat64;
  CHECK(dbl || x->dtype() == dtypes::kFloat32) << x->dtype().name();
  const DType u = dbl ? dtypes::kUint64 : dtypes::kUint32;
  const int w = dbl ? 64 : 32, m = dbl ? 52 : 23, b = dbl ? 1023 : 127;
  const int64_t inf_bits = dbl ? 0x7ff0000000000000 : 0x7f800000, rebias = b - f.bias;
  UOpPtr ub = bits(x, u);
  UOpPtr a = bin(Op::AND, ub, static_cast<int64_t>((uint64_t{1} << (w - 1)) - 1));
  UOpPtr sign = bin(Op::SHL, bin(Op::SHR, ub, w - 1), 7);
  UOpPtr e = bin(Op::SHR, a, m);
  // Normal results: rebias the exponent, round the mantissa; a carry moves to the exponent.
  UOpPtr normal = rne_shr(bin(Op::SUB, a, rebias << m), k(u, m - f.mant));
  normal = sel(less(f.max_code, normal), f.overflow_code, normal);
  // Subnormal results: the significand shifted by the exponent's distance below the first normal
  // binade, the shift clamped to [1, m + 2] (past m + 1 everything rounds to zero).
  UOpPtr sig = bin(Op::OR, bin(Op::AND, a, (int64_t{1} << m) - 1), int64_t{1} << m);
  UOpPtr e_sub = sel(less(rebias, e), rebias, e);
  UOpPtr shift = bin(Op::SUB, k(u, rebias + m + 1 - f.mant), e_sub);
  shift = sel(less(m + 2, shift), m + 2, shift);
  UOpPtr code = sel(less(rebias, e), normal, rne_shr(sig, shift));
  if (dtypes::is_fp8_fnuz(fp8)) {  // NaN and overflow are 0x80; zero has no sign
    code = sel(less(inf_bits, a), 0x80, code);
    return to(sel(less(0, code), bin(Op::OR, code, sign), k(u, 0)), dtypes::kUint8);
  }
  code = sel(less(inf_bits, a), 0x7f, code);  // NaN
  return to(bin(Op::OR, code, sign), dtypes::kUint8);
}

UOpPtr fp8_decode_uop(DType fp8, const UOpPtr& code) {
  const Fp8Format f = fp8_format(fp8);
  const DType u = dtypes::kUint32;
  UOpPtr c = to(code, u);
  UOpPtr sign = bin(Op::SHL, bin(Op::AND, c, 0x80), 24);
  UOpPtr mag = bin(Op::AND, c, 0x7f);
  UOpPtr mant = bin(Op::AND, mag, (1 << f.mant) - 1);
  UOpPtr normal = bin(Op::ADD, bin(Op::SHL, mag, 23 - f.mant), (127 - f.bias) << 23);
  // Subnormals: mant quanta of 2^(1 - bias - mant), exact in float32 (and normal there).
  UOpPtr quantum =
      UOp::cnst(dtypes::kFloat32, 1.0 / static_cast<double>(1 << (f.bias + f.mant - 1)));
  UOpPtr sub = bits(bin(Op::MUL, to(mant, dtypes::kFloat32), quantum), u);
  UOpPtr v = sel(less(mag, k(u, 1 << f.mant)), sub, normal);
  if (dtypes::is_fp8_fnuz(fp8)) {
    v = sel(UOp::make(Op::CMPEQ, dtypes::kBool, {c, k(u, 0x80)}), k(u, 0x7fc00000),
            bin(Op::OR, v, sign));
    return bits(v, dtypes::kFloat32);  // 0x80 is the NaN; every other code is finite
  }
  if (fp8.scalar == Scalar::kFp8e4m3) {
    v = sel(less(0x7e, mag), 0x7fc00000, v);  // S.1111.111 is NaN
  } else {
    UOpPtr special = sel(less(0x7c, mag), 0x7fc00000, k(u, 0x7f800000));  // inf, NaN
    v = sel(less(0x7b, mag), special, v);
  }
  return bits(bin(Op::OR, v, sign), dtypes::kFloat32);
}

namespace {

// Rewrites one AST bottom-up. `val` maps an old node to its new value (float32 for fp8 values);
// `code` maps an old fp8 node to a uint8 node holding its code, where one is at hand.
class Fp8Lowering {
 public:
  UOpPtr run(const UOpPtr& sink) {
    for (const UOp* n : sink->toposort()) visit(n);
    return val_.at(sink.get());
  }

 private:
  void visit(const UOp* n) {
    std::vector<UOpPtr> src;
    for (auto& s : n->src()) src.push_back(val_.at(s.get()));
    const DType t = n->dtype();
    const Op op = n->op();
    if (t.ptr && dtypes::is_fp8(t)) {  // buffers and views of fp8 hold bytes
      val_[n] = UOp::make(op, DType{Scalar::kUint8, t.count, true, t.addr}, src, n->arg());
    } else if (op == Op::STORE && dtypes::is_fp8(n->src(1)->dtype())) {
      val_[n] = UOp::make(op, t, {src[0], code_of(n->src(1).get())}, n->arg());
    } else if (!dtypes::is_fp8(t)) {
      if ((op == Op::CAST || op == Op::BITCAST) && dtypes::is_fp8(n->src(0)->dtype())) {
        val_[n] = op == Op::CAST ? to(src[0], t) : from_code(code_of(n->src(0).get()), t);
      } else {
        val_[n] = UOp::make(op, t, src, n->arg());
      }
    } else {
      fp8_value(n, t, std::move(src));
    }
  }

  // A node of fp8 dtype `t` with new sources `src`.
  void fp8_value(const UOp* n, DType t, std::vector<UOpPtr> src) {
    const DType f32 = dtypes::kFloat32.vec(t.count);
    CHECK(t.count == 1) << "fp8 vectors in a kernel AST: " << t.name();
    switch (n->op()) {
      case Op::LOAD:
        set_code(n, t, UOp::make(Op::LOAD, dtypes::kUint8, src, n->arg()));
        return;
      case Op::CONST:
        val_[n] = UOp::cnst(f32, fp8_round(t, n->const_value()));
        return;
      case Op::CAST: {
        DType from = n->src(0)->dtype();
        if (dtypes::is_fp8(from) && from.scalar == t.scalar) {
          val_[n] = src[0];
        } else {
          UOpPtr x = from.scalar == Scalar::kFloat64 ? src[0] : to(src[0], f32);
          set_code(n, t, fp8_encode_uop(t, x));
        }
        return;
      }
      case Op::BITCAST: {
        const UOp* from = n->src(0).get();
        set_code(n, t, dtypes::is_fp8(from->dtype()) ? code_of(from) : from_code_bits(src[0]));
        return;
      }
      case Op::NEG:
      case Op::MAX:
      case Op::WHERE:  // exact on fp8 values
        val_[n] = UOp::make(n->op(), f32, src, n->arg());
        return;
      default:  // compute in float32, round once to fp8
        CHECK(is_alu(n->op()) || n->op() == Op::REDUCE_AXIS) << op_name(n->op());
        set_code(n, t, fp8_encode_uop(t, UOp::make(n->op(), f32, src, n->arg())));
    }
  }

  void set_code(const UOp* n, DType t, const UOpPtr& code) {
    code_[n] = code;
    val_[n] = fp8_decode_uop(t, code);
  }
  UOpPtr code_of(const UOp* n) {
    auto it = code_.find(n);
    return it != code_.end() ? it->second : fp8_encode_uop(n->dtype(), val_.at(n));
  }
  // A uint8 code viewed as the 1-byte type `t` (bitcasts from fp8).
  static UOpPtr from_code(const UOpPtr& code, DType t) {
    return t == code->dtype() ? code : bits(code, t);
  }
  // A 1-byte value as a uint8 code (bitcasts to fp8).
  static UOpPtr from_code_bits(const UOpPtr& x) {
    return x->dtype() == dtypes::kUint8 ? x : bits(x, dtypes::kUint8);
  }

  std::unordered_map<const UOp*, UOpPtr> val_, code_;
};

}  // namespace

UOpPtr lower_fp8(const UOpPtr& sink) {
  bool any = false;
  for (const UOp* n : sink->toposort()) any = any || dtypes::is_fp8(n->dtype());
  return any ? Fp8Lowering().run(sink) : sink;
}

}  // namespace baregrad::compiler
