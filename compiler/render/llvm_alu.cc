// ALU ops and conversions of the LLVM emitter. Integer results match exec_alu_int: division
// and remainder by zero give 0, shifts use the amount mod 64 on the value widened to 64 bits.
#include "base/check.h"
#include "compiler/render/llvm_emit.h"
#include "compiler/render/llvm_types.h"

namespace baregrad::compiler {
namespace {

enum class Kind { kFloat, kSigned, kUnsigned, kBool };

Kind kind(DType t) {
  if (dtypes::is_float(t)) return Kind::kFloat;
  if (dtypes::is_bool(t)) return Kind::kBool;
  return dtypes::is_unsigned(t) ? Kind::kUnsigned : Kind::kSigned;
}

int bits(DType t) { return t.scalar == Scalar::kBool ? 1 : t.scalar_size() * 8; }

std::string cast_inst(const char* inst, const std::string& v, DType from, DType to) {
  return std::string(inst) + " " + llvm_type(from) + " " + v + " to " + llvm_type(to);
}

}  // namespace

void LlvmEmitter::emit_alu(const UOp* u) {
  Op op = u->op();
  if (op_group(op) == OpGroup::Unary) {
    def(u, emit_unary(u));
    return;
  }
  if (op_group(op) == OpGroup::Binary) {
    def(u, emit_binary(u));
    return;
  }
  DType t = u->dtype();
  std::string ty = llvm_type(t), a = val(u->src(0)), b = val(u->src(1)), c = val(u->src(2));
  if (op == Op::WHERE) {
    def(u, assign("select " + llvm_type(u->src(0)->dtype()) + " " + a + ", " + ty + " " + b + ", " +
                  ty + " " + c));
    return;
  }
  CHECK(op == Op::MULACC) << "llvm: unknown ALU op " << op_name(op);
  Kind k = kind(t);
  const char* mul = k == Kind::kFloat ? "fmul contract" : k == Kind::kBool ? "and" : "mul";
  const char* add = k == Kind::kFloat ? "fadd contract" : k == Kind::kBool ? "or" : "add";
  std::string p = assign(std::string(mul) + " " + ty + " " + a + ", " + b);
  def(u, assign(std::string(add) + " " + ty + " " + p + ", " + c));
}

std::string LlvmEmitter::emit_binary(const UOp* u) {
  DType t = u->src(0)->dtype();
  Kind k = kind(t);
  std::string ty = llvm_type(t), a = val(u->src(0)), b = val(u->src(1));
  auto bin = [&](const std::string& inst) { return assign(inst + " " + ty + " " + a + ", " + b); };
  auto fp = [&](const char* f, const char* i, const char* bl) {
    return bin(k == Kind::kFloat ? f : k == Kind::kBool ? bl : i);
  };
  switch (u->op()) {
    case Op::ADD:
      return fp("fadd contract", "add", "or");
    case Op::SUB:
      return fp("fsub contract", "sub", "xor");
    case Op::MUL:
      return fp("fmul contract", "mul", "and");
    case Op::FDIV:
      CHECK(k == Kind::kFloat) << "llvm: FDIV of " << t.name();
      return bin("fdiv");
    case Op::IDIV:
    case Op::MOD:
      if (k == Kind::kFloat) {
        CHECK(u->op() == Op::MOD) << "llvm: IDIV of " << t.name();
        return bin("frem");
      }
      if (k == Kind::kBool) return u->op() == Op::IDIV ? bin("and") : llvm_splat(t, 0);
      return emit_int_divmod(u);
    case Op::MAX: {
      if (k == Kind::kBool) return bin("or");
      if (t.scalar == Scalar::kFloat16 || t.scalar == Scalar::kBFloat16) {
        // WORKAROUND(llvm19 x86): vector half llvm.maximum drops NaNs; use (a < b ? b : a)
        // with NaN propagation instead (InstCombine folds a float-promoted maximum back).
        std::string bt = llvm_type(dtypes::kBool.vec(t.count));
        std::string m = assign("select " + bt + " " + bin("fcmp olt") + ", " + ty + " " + b + ", " +
                               ty + " " + a);
        std::string nan = bin("fcmp uno"), sum = bin("fadd");
        return assign("select " + bt + " " + nan + ", " + ty + " " + sum + ", " + ty + " " + m);
      }
      const char* fn = k == Kind::kFloat ? "maximum" : k == Kind::kSigned ? "smax" : "umax";
      return call_intrinsic(ty, fn, llvm_suffix(t), {ty + " " + a, ty + " " + b});
    }
    case Op::POW:
      CHECK(k == Kind::kFloat) << "llvm: POW of " << t.name();
      return call_intrinsic(ty, "pow", llvm_suffix(t), {ty + " " + a, ty + " " + b});
    case Op::CMPLT:
      return bin(k == Kind::kFloat ? "fcmp olt" : k == Kind::kSigned ? "icmp slt" : "icmp ult");
    case Op::CMPNE:
      return bin(k == Kind::kFloat ? "fcmp une" : "icmp ne");
    case Op::CMPEQ:
      return bin(k == Kind::kFloat ? "fcmp oeq" : "icmp eq");
    case Op::AND:
    case Op::OR:
    case Op::XOR:
      CHECK(k != Kind::kFloat) << "llvm: " << op_name(u->op()) << " of " << t.name();
      return bin(u->op() == Op::AND ? "and" : u->op() == Op::OR ? "or" : "xor");
    case Op::SHL:
    case Op::SHR:
      return emit_shift(u);
    default:
      UNREACHABLE() << "llvm: binary op " << op_name(u->op());
  }
}

std::string LlvmEmitter::emit_int_divmod(const UOp* u) {
  DType t = u->src(0)->dtype();
  bool is_signed = kind(t) == Kind::kSigned, div = u->op() == Op::IDIV;
  std::string ty = llvm_type(t), a = val(u->src(0)), b = val(u->src(1));
  std::string inst = std::string(is_signed ? (div ? "sdiv" : "srem") : (div ? "udiv" : "urem"));
  const UOpPtr& bu = u->src(1);
  if (bu->is_const() && bu->const_int() != 0 && !(is_signed && bu->const_int() == -1))
    return assign(inst + " " + ty + " " + a + ", " + b);
  // NOTE: LLVM leaves x/0 and INT_MIN/-1 undefined; the reference gives 0 and -x (x % -1 = 0).
  std::string bt = llvm_type(dtypes::kBool.vec(t.count)), zero = llvm_splat(t, 0);
  std::string is_zero = assign("icmp eq " + ty + " " + b + ", " + zero), bad = is_zero, minus1;
  if (is_signed) {
    minus1 = assign("icmp eq " + ty + " " + b + ", " + llvm_splat(t, -1));
    bad = assign("or " + bt + " " + is_zero + ", " + minus1);
  }
  std::string d =
      assign("select " + bt + " " + bad + ", " + ty + " " + llvm_splat(t, 1) + ", " + ty + " " + b);
  std::string q = assign(inst + " " + ty + " " + a + ", " + d);
  if (is_signed && div) {
    std::string neg = assign("sub " + ty + " " + zero + ", " + a);
    q = assign("select " + bt + " " + minus1 + ", " + ty + " " + neg + ", " + ty + " " + q);
    return assign("select " + bt + " " + is_zero + ", " + ty + " " + zero + ", " + ty + " " + q);
  }
  return assign("select " + bt + " " + bad + ", " + ty + " " + zero + ", " + ty + " " + q);
}

std::string LlvmEmitter::emit_shift(const UOp* u) {
  DType t = u->src(0)->dtype(), bt = u->src(1)->dtype();
  Kind k = kind(t);
  const char* inst = u->op() == Op::SHL ? "shl" : k == Kind::kSigned ? "ashr" : "lshr";
  const UOpPtr& amount = u->src(1);
  if (k != Kind::kBool && amount->is_const() && amount->const_int() >= 0 &&
      amount->const_int() < bits(t) && bt == t) {
    return assign(std::string(inst) + " " + llvm_type(t) + " " + val(u->src(0)) + ", " +
                  val(amount));
  }
  DType w = dtypes::kInt64.vec(t.count);
  std::string wt = llvm_type(w);
  std::string a = convert(val(u->src(0)), t, w), b = convert(val(amount), bt, w);
  std::string m = assign("and " + wt + " " + b + ", " + llvm_splat(w, 63));
  std::string s = assign(std::string(inst) + " " + wt + " " + a + ", " + m);
  return convert(s, w, t);
}

std::string LlvmEmitter::emit_unary(const UOp* u) {
  DType t = u->src(0)->dtype();
  Kind k = kind(t);
  std::string ty = llvm_type(t), a = val(u->src(0));
  auto intrinsic = [&](const char* fn) {
    CHECK(k == Kind::kFloat) << "llvm: " << op_name(u->op()) << " of " << t.name();
    return call_intrinsic(ty, fn, llvm_suffix(t), {ty + " " + a});
  };
  switch (u->op()) {
    case Op::CAST:
      return convert(a, t, u->dtype());
    case Op::BITCAST:
      if (llvm_type(t) == llvm_type(u->dtype())) return a;
      CHECK(t.itemsize() == u->dtype().itemsize() && k != Kind::kBool)
          << "llvm: BITCAST " << t.name() << " -> " << u->dtype().name();
      return assign(cast_inst("bitcast", a, t, u->dtype()));
    case Op::NEG:
      if (k == Kind::kFloat) return assign("fneg " + ty + " " + a);
      if (k == Kind::kBool) return a;
      return assign("sub " + ty + " " + llvm_splat(t, 0) + ", " + a);
    case Op::EXP2:
      return intrinsic("exp2");
    case Op::LOG2:
      return intrinsic("log2");
    case Op::SIN:
      return intrinsic("sin");
    case Op::SQRT:
      return intrinsic("sqrt");
    case Op::TRUNC:
      return k == Kind::kFloat ? intrinsic("trunc") : a;
    case Op::RECIP:
      CHECK(k == Kind::kFloat) << "llvm: RECIP of " << t.name();
      return assign("fdiv " + ty + " " + llvm_splat(t, 1) + ", " + a);
    default:
      UNREACHABLE() << "llvm: unary op " << op_name(u->op());
  }
}

std::string LlvmEmitter::convert(const std::string& v, DType from, DType to) {
  CHECK(from.count == to.count) << "llvm: CAST " << from.name() << " -> " << to.name();
  Kind kf = kind(from), kt = kind(to);
  if (from == to) return v;
  if (kt == Kind::kBool) {
    std::string cmp = kf == Kind::kFloat ? "fcmp une " : "icmp ne ";
    return assign(cmp + llvm_type(from) + " " + v + ", " + llvm_splat(from, 0));
  }
  if (kf == Kind::kBool)
    return assign(cast_inst(kt == Kind::kFloat ? "uitofp" : "zext", v, from, to));
  if (kf == Kind::kFloat && kt == Kind::kFloat) {
    if (from.scalar_size() == to.scalar_size()) {  // half <-> bfloat goes through float
      DType f32 = dtypes::kFloat32.vec(from.count);
      std::string x = assign(cast_inst("fpext", v, from, f32));
      return to.scalar == Scalar::kBFloat16 ? to_bfloat(x, f32, to)
                                            : assign(cast_inst("fptrunc", x, f32, to));
    }
    if (to.scalar == Scalar::kBFloat16) return to_bfloat(v, from, to);
    return assign(
        cast_inst(from.scalar_size() < to.scalar_size() ? "fpext" : "fptrunc", v, from, to));
  }
  if (kf == Kind::kFloat) return float_to_int(v, from, to);
  if (kt == Kind::kFloat && to.scalar_size() == 2 && from.scalar_size() >= 4) {
    // Through double (exact below 2**53), rounded once to the 16-bit float: a float32 step
    // would round twice.
    DType f64 = dtypes::kFloat64.vec(from.count);
    std::string d = assign(cast_inst(kf == Kind::kSigned ? "sitofp" : "uitofp", v, from, f64));
    return to.scalar == Scalar::kBFloat16 ? to_bfloat(d, f64, to)
                                          : assign(cast_inst("fptrunc", d, f64, to));
  }
  if (kt == Kind::kFloat)
    return assign(cast_inst(kf == Kind::kSigned ? "sitofp" : "uitofp", v, from, to));
  if (bits(from) == bits(to)) return v;
  if (bits(from) > bits(to)) return assign(cast_inst("trunc", v, from, to));
  return assign(cast_inst(kf == Kind::kSigned ? "sext" : "zext", v, from, to));
}

std::string LlvmEmitter::to_bfloat(const std::string& v, DType from, DType to) {
  // LLVM's fptrunc to bfloat is VCVTNEPS2BF16 on x86 CPUs with AVX512-BF16, which flushes
  // subnormal inputs and results to zero; this rounds to nearest even in integer arithmetic.
  // A double goes to float rounded to odd first (toward zero, then the last bit set when
  // inexact): with 16 more bits than the bfloat, that double rounding equals rounding once.
  DType f32 = dtypes::kFloat32.vec(from.count), u32 = dtypes::kUint32.vec(from.count);
  DType u16 = dtypes::kUint16.vec(from.count);
  std::string fty = llvm_type(from), uty = llvm_type(u32), bits;
  if (from.scalar == Scalar::kFloat64) {
    std::string t = assign(cast_inst("fptrunc", v, from, f32));
    std::string back = assign(cast_inst("fpext", t, f32, from));
    std::string inexact = assign("fcmp one " + fty + " " + back + ", " + v);  // NaN: false
    std::string abs_back = call_intrinsic(fty, "fabs", llvm_suffix(from), {fty + " " + back});
    std::string abs_v = call_intrinsic(fty, "fabs", llvm_suffix(from), {fty + " " + v});
    std::string away = assign("fcmp ogt " + fty + " " + abs_back + ", " + abs_v);
    std::string tb = assign(cast_inst("bitcast", t, f32, u32));
    std::string toward0 = assign("sub " + uty + " " + tb + ", " + llvm_splat(u32, 1));
    std::string tz = assign("select " + llvm_type(dtypes::kBool.vec(from.count)) + " " + away +
                            ", " + uty + " " + toward0 + ", " + uty + " " + tb);
    std::string odd = assign("or " + uty + " " + tz + ", " + llvm_splat(u32, 1));
    bits = assign("select " + llvm_type(dtypes::kBool.vec(from.count)) + " " + inexact + ", " +
                  uty + " " + odd + ", " + uty + " " + tb);
  } else {
    CHECK(from.scalar == Scalar::kFloat32) << "llvm: CAST " << from.name() << " -> bfloat";
    bits = assign(cast_inst("bitcast", v, from, u32));
  }
  std::string hi = assign("lshr " + uty + " " + bits + ", " + llvm_splat(u32, 16));
  std::string lsb = assign("and " + uty + " " + hi + ", " + llvm_splat(u32, 1));
  std::string up = assign("add " + uty + " " + bits + ", " + llvm_splat(u32, 0x7fff));
  std::string rounded = assign("lshr " + uty + " " + assign("add " + uty + " " + up + ", " + lsb) +
                               ", " + llvm_splat(u32, 16));
  // A NaN keeps its sign and top payload bits, made quiet (rounding could carry it to inf).
  std::string quiet = assign("or " + uty + " " + hi + ", " + llvm_splat(u32, 0x40));
  std::string nan = assign("fcmp uno " + fty + " " + v + ", " + v);
  std::string out = assign("select " + llvm_type(dtypes::kBool.vec(from.count)) + " " + nan + ", " +
                           uty + " " + quiet + ", " + uty + " " + rounded);
  return assign(cast_inst("bitcast", assign(cast_inst("trunc", out, u32, u16)), u16, to));
}

std::string LlvmEmitter::float_to_int(const std::string& v, DType from, DType to) {
  // Narrow targets convert through a wider signed int (as C's int conversions do on x86), so
  // only values outside that wider range are poison.
  if (to.scalar == Scalar::kUint64) return assign(cast_inst("fptoui", v, from, to));
  if (bits(to) == 64 || to.scalar == Scalar::kInt32)
    return assign(cast_inst("fptosi", v, from, to));
  DType wide = (to.scalar == Scalar::kUint32 ? dtypes::kInt64 : dtypes::kInt32).vec(to.count);
  return assign(cast_inst("trunc", assign(cast_inst("fptosi", v, from, wide)), wide, to));
}

}  // namespace baregrad::compiler
